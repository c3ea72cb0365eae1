package identity

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// signingKeyBytes is the HMAC-SHA256 key size: the hash's block-sized
// output, as RFC 2104 advises at least.
const signingKeyBytes = 32

// LoadSigningKey returns the deployment's token signing key, creating it
// when absent. One transaction puts a fresh key only while none exists
// and otherwise reads the one there, so servers starting together agree
// on the first key written and every server accepts every other's tokens.
func LoadSigningKey(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys) ([]byte, error) {
	fresh := make([]byte, signingKeyBytes)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("identity: new signing key: %w", err)
	}
	val, err := etcdschema.EncodeString(&etcdschema.SigningKey{Key: fresh, Created: time.Now().UTC()})
	if err != nil {
		return nil, err
	}
	k := keys.IdentitySigningKey()
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, val)).
		Else(clientv3.OpGet(k)).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("identity: signing key %s: %w", k, err)
	}
	if resp.Succeeded {
		return fresh, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) != 1 {
		return nil, fmt.Errorf("identity: signing key %s vanished while read", k)
	}
	var sk etcdschema.SigningKey
	if err := etcdschema.Decode(k, kvs[0].Value, &sk); err != nil {
		return nil, err
	}
	if len(sk.Key) < signingKeyBytes {
		return nil, fmt.Errorf("identity: signing key %s has %d bytes, want %d", k, len(sk.Key), signingKeyBytes)
	}
	return sk.Key, nil
}
