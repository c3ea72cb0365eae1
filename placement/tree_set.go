package placement

import "iter"

// treeSet is the slots of one provider tree (indexState.trees). Nearly
// every tree of a cloud is one compute host's root alone; at 100,000
// hosts a map per tree (a map header and its group: two heap objects)
// was 200,000 live objects per index, each one a collection marks. A
// one-provider tree holds its slot inline; a map is made only for a
// tree of two or more, and dropped when it is back to one.
//
// A treeSet is a value kept in the trees map: its zero value is the tree
// of slot 0, not an empty tree, so a reader looks a tree up with the
// comma-ok form before it ranges over it. Trees are linked and unlinked
// only under the index's write lock; a search's view (candidate_view.go)
// builds trees of its own.
type treeSet struct {
	// one is the tree's only slot while many is nil.
	one int32
	// many holds the slots of a tree of two or more; nil otherwise.
	many map[int32]struct{}
}

// singleTree is the tree of slot alone.
func singleTree(slot int32) treeSet { return treeSet{one: slot} }

// len is how many slots t holds (1 at least).
func (t treeSet) len() int {
	if t.many != nil {
		return len(t.many)
	}
	return 1
}

// with returns t with slot added: the same map when t has one.
func (t treeSet) with(slot int32) treeSet {
	if t.many != nil {
		t.many[slot] = struct{}{}
		return t
	}
	if slot == t.one {
		return t
	}
	return treeSet{many: map[int32]struct{}{t.one: {}, slot: {}}}
}

// without returns t with slot removed, and whether that left it empty
// (the caller then deletes the tree). A tree back to one slot drops its
// map.
func (t treeSet) without(slot int32) (rest treeSet, empty bool) {
	if t.many == nil {
		return t, slot == t.one
	}
	delete(t.many, slot)
	if len(t.many) == 1 {
		for last := range t.many {
			return singleTree(last), false
		}
	}
	return t, len(t.many) == 0
}

// all yields t's slots, in no particular order.
func (t treeSet) all() iter.Seq[int32] {
	return func(yield func(int32) bool) {
		if t.many == nil {
			yield(t.one)
			return
		}
		for slot := range t.many {
			if !yield(slot) {
				return
			}
		}
	}
}
