package api

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// DefaultFlavors are OpenStack's classic m1 flavors, preloaded by `berth dev`
// and by servers with the api role so a fresh cloud can boot at once.
func DefaultFlavors() []etcdschema.Flavor {
	return []etcdschema.Flavor{
		{ID: "1", Name: "m1.tiny", VCPUs: 1, RAMMB: 512, DiskGB: 1},
		{ID: "2", Name: "m1.small", VCPUs: 1, RAMMB: 2048, DiskGB: 20},
		{ID: "3", Name: "m1.medium", VCPUs: 2, RAMMB: 4096, DiskGB: 40},
		{ID: "4", Name: "m1.large", VCPUs: 4, RAMMB: 8192, DiskGB: 80},
		{ID: "5", Name: "m1.xlarge", VCPUs: 8, RAMMB: 16384, DiskGB: 160},
	}
}

// EnsureFlavors creates each flavor that does not exist yet; an operator's
// changes to an existing one are never overwritten.
func EnsureFlavors(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys, flavors []etcdschema.Flavor) error {
	for i := range flavors {
		f := flavors[i]
		key := keys.Flavor(f.Name)
		_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, etcdschema.MustEncode(&f))).Commit()
		if err != nil {
			return fmt.Errorf("ensure flavor %s: %w", f.Name, err)
		}
	}
	return nil
}
