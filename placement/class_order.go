package placement

import (
	"context"
	"slices"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Placement names resource classes in the order of their ids: a usages
// answer, a provider's allocations, and every message that lists classes
// ("Inventory for 'VCPU, DISK_GB, CUSTOM_ZED, CUSTOM_ALPHA' ... in use")
// come in that order, as its queries group by class id. The standard
// classes have the ids of os-resource-classes' order; a custom class gets
// the next id when it is created. Berth records no id: a custom class's
// creation order is the create revision of its key in etcd, which every
// class has (those written by older versions too). A custom class that
// etcd no longer has (deleted since it was used) sorts after the others,
// by name.

// stdClassRank is each standard class's place in os-resource-classes.
var stdClassRank = func() map[string]int {
	m := make(map[string]int, len(standardResourceClasses))
	for i, rc := range standardResourceClasses {
		m[rc] = i
	}
	return m
}()

// classOrder holds the create revisions of the custom classes it ranks.
type classOrder map[string]int64

// less says whether class a comes before b in Placement's id order.
func (o classOrder) less(a, b string) bool {
	ra, stdA := stdClassRank[a]
	rb, stdB := stdClassRank[b]
	switch {
	case stdA && stdB:
		return ra < rb
	case stdA != stdB:
		return stdA
	}
	ca, cb := o[a], o[b]
	switch {
	case ca != 0 && cb != 0 && ca != cb:
		return ca < cb
	case (ca == 0) != (cb == 0):
		return ca != 0 // an unknown class last
	}
	return a < b
}

// sorted returns names in o's order.
func (o classOrder) sorted(names []string) []string {
	out := slices.Clone(names)
	sort.Slice(out, func(i, j int) bool { return o.less(out[i], out[j]) })
	return out
}

// classOrderOf reads what ranking names needs: the create revisions of
// their custom classes, when there are two or more of them (one custom
// class comes after the standard ones whatever its id).
func (s *Service) classOrderOf(ctx context.Context, names []string) (classOrder, error) {
	var custom []string
	for _, rc := range names {
		if _, std := stdClassRank[rc]; !std && strings.HasPrefix(rc, "CUSTOM_") && !slices.Contains(custom, rc) {
			custom = append(custom, rc)
		}
	}
	if len(custom) < 2 {
		return nil, nil
	}
	ops := make([]clientv3.Op, 0, len(custom))
	for _, rc := range custom {
		ops = append(ops, clientv3.OpGet(s.keys.CustomResourceClass(rc), clientv3.WithKeysOnly()))
	}
	resps, err := s.readMany(ctx, ops)
	if err != nil {
		return nil, err
	}
	o := make(classOrder, len(custom))
	for i, rc := range custom {
		if kvs := resps[i].GetResponseRange().Kvs; len(kvs) > 0 {
			o[rc] = kvs[0].CreateRevision
		}
	}
	return o, nil
}

// ClassOrder returns names in Placement's class id order: the standard
// classes in os-resource-classes' order, then the custom ones in the order
// they were created.
func (s *Service) ClassOrder(ctx context.Context, names []string) ([]string, error) {
	o, err := s.classOrderOf(ctx, names)
	if err != nil {
		return nil, err
	}
	return o.sorted(names), nil
}
