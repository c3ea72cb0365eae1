package informer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// KV is one key-value of a list's chunk. Key and Value alias the chunk
// as etcd sent it: they are valid only until the fn they were handed to
// returns, and must not be modified. A reader that keeps a key or a
// value copies it (string(kv.Key), a decoder's fresh strings).
type KV struct {
	Key, Value                  []byte
	CreateRevision, ModRevision int64
	Version, Lease              int64
}

// ListKVs is ListRaw without a protobuf message per key: each chunk of
// etcd's RangeStream is read into a buffer of the list's own (reused
// from chunk to chunk) and its key-values are sliced out of that buffer
// in place. At 100,000 hosts a scheduler's cold start lists 2.5 million
// keys; protobuf's decoding made a KeyValue and a copy of every key and
// value (1.1 GB of the load's 2.4 GB of garbage, and 19% of its CPU),
// all dropped again as soon as the values were decoded. Like ListRaw it
// reads at one revision (rev, or 0: the current one), the next chunk
// received while fn works; fn gets each chunk's key-values in key order.
// A client without a network connection (the embedded member's
// in-process one) or a server without RangeStream is read as ListRaw
// reads it.
func ListKVs(ctx context.Context, cli *clientv3.Client, prefix string, rev int64,
	fn func(kvs []KV) error) (int64, error) {
	if rev == 0 {
		resp, err := cli.Get(ctx, prefix)
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", prefix, err)
		}
		rev = resp.Header.Revision
	}
	if conn := cli.ActiveConnection(); conn != nil {
		streamed, err := listStreamKVs(ctx, conn, prefix, rev, fn)
		if streamed || !isUnimplemented(err) {
			return rev, err
		}
	}
	var kvs []KV
	return ListRaw(ctx, cli, prefix, rev, func(page []*mvccpb.KeyValue) error {
		kvs = kvs[:0]
		for _, kv := range page {
			kvs = append(kvs, KV{Key: kv.Key, Value: kv.Value, CreateRevision: kv.CreateRevision,
				ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease})
		}
		return fn(kvs)
	})
}

// chunkBuffers is how many chunk buffers a list cycles through: one
// being received, one waiting, one with fn.
const chunkBuffers = 3

// chunk is one RangeStream message's bytes, as received.
type chunk struct {
	buf []byte
	err error
}

// listStreamKVs reads the prefix with one RangeStream at rev on conn,
// receiving each message's bytes as they are (rawCodec) while fn works
// on the previous one. streamed is as listStream's.
func listStreamKVs(ctx context.Context, conn *grpc.ClientConn, prefix string, rev int64,
	fn func(kvs []KV) error) (streamed bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream and its receiver on an early return
	req := &pb.RangeRequest{Key: []byte(prefix), RangeEnd: []byte(clientv3.GetPrefixRangeEnd(prefix)), Revision: rev}
	cs, err := conn.NewStream(sctx, &pb.KV_ServiceDesc.Streams[0], pb.KV_RangeStream_FullMethodName,
		grpc.ForceCodecV2(rawCodec{}), grpc.WaitForReady(true), grpc.MaxCallRecvMsgSize(math.MaxInt32))
	if err == nil {
		err = cs.SendMsg(req)
	}
	if err == nil {
		err = cs.CloseSend()
	}
	if err != nil {
		return false, fmt.Errorf("list %s at revision %d: %w", prefix, rev, rpctypes.Error(err))
	}
	free := make(chan *chunk, chunkBuffers)
	for range chunkBuffers {
		free <- &chunk{}
	}
	received := make(chan *chunk, 1)
	go func() {
		defer close(received)
		for {
			var c *chunk
			select {
			case c = <-free:
			case <-sctx.Done():
				return
			}
			c.err = cs.RecvMsg(c)
			if errors.Is(c.err, io.EOF) {
				return
			}
			select {
			case received <- c:
			case <-sctx.Done():
				return
			}
			if c.err != nil {
				return
			}
		}
	}()
	var kvs []KV
	for c := range received {
		if c.err != nil {
			return streamed, fmt.Errorf("list %s at revision %d: %w", prefix, rev, rpctypes.Error(c.err))
		}
		var ok bool
		kvs, ok, err = parseRangeStreamResponse(c.buf, kvs[:0])
		if err != nil {
			return streamed, fmt.Errorf("list %s at revision %d: %w", prefix, rev, err)
		}
		if ok {
			streamed = true
			if err := fn(kvs); err != nil {
				return true, err
			}
		}
		clear(kvs) // the buffer is reused: drop the slices into it
		free <- c
	}
	if err := ctx.Err(); err != nil {
		return streamed, fmt.Errorf("list %s: %w", prefix, err)
	}
	if !streamed {
		return false, fmt.Errorf("list %s at revision %d: the stream ended without a response", prefix, rev)
	}
	return true, nil
}

// rawCodec sends a RangeRequest as protobuf and receives a message as
// its bytes, into a *chunk's buffer (grown, never shrunk).
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(*pb.RangeRequest)
	if !ok {
		return nil, fmt.Errorf("raw codec: cannot send %T", v)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	c, ok := v.(*chunk)
	if !ok {
		return fmt.Errorf("raw codec: cannot receive into %T", v)
	}
	n := data.Len()
	if cap(c.buf) < n {
		c.buf = make([]byte, n)
	}
	c.buf = c.buf[:n]
	data.CopyTo(c.buf)
	return nil
}

// Field numbers of etcd's messages read here (rpc.proto, kv.proto).
const (
	fieldStreamRangeResponse = 1 // RangeStreamResponse.range_response
	fieldRangeKvs            = 2 // RangeResponse.kvs
	fieldKVKey               = 1
	fieldKVCreateRevision    = 2
	fieldKVModRevision       = 3
	fieldKVVersion           = 4
	fieldKVValue             = 5
	fieldKVLease             = 6
)

// parseRangeStreamResponse appends the key-values of a
// RangeStreamResponse's bytes to kvs, slicing keys and values out of b.
// ok is false for a message without a range response (as the client's
// RangeResponse nil). Fields it does not read are skipped, as protobuf
// skips unknown ones.
func parseRangeStreamResponse(b []byte, kvs []KV) (_ []KV, ok bool, err error) {
	err = eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != fieldStreamRangeResponse || typ != protowire.BytesType {
			return nil
		}
		ok = true
		return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num != fieldRangeKvs || typ != protowire.BytesType {
				return nil
			}
			kv, err := parseKeyValue(v)
			if err != nil {
				return err
			}
			kvs = append(kvs, kv)
			return nil
		})
	})
	return kvs, ok, err
}

// parseKeyValue reads one mvccpb.KeyValue's bytes. A field that repeats
// takes its last value, as protobuf's decoding does.
func parseKeyValue(b []byte) (KV, error) {
	var kv KV
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch {
		case typ == protowire.BytesType && num == fieldKVKey:
			kv.Key = v
		case typ == protowire.BytesType && num == fieldKVValue:
			kv.Value = v
		case typ == protowire.VarintType && num == fieldKVCreateRevision:
			kv.CreateRevision = int64(n)
		case typ == protowire.VarintType && num == fieldKVModRevision:
			kv.ModRevision = int64(n)
		case typ == protowire.VarintType && num == fieldKVVersion:
			kv.Version = int64(n)
		case typ == protowire.VarintType && num == fieldKVLease:
			kv.Lease = int64(n)
		}
		return nil
	})
	return kv, err
}

// eachField calls f for every field of a protobuf message's bytes: a
// length-delimited one with its bytes (v), a varint with its value (n);
// other wire types are skipped.
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error) error {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return fmt.Errorf("range response: %w", protowire.ParseError(l))
		}
		b = b[l:]
		var v []byte
		var n uint64
		switch typ {
		case protowire.BytesType:
			v, l = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			n, l = protowire.ConsumeVarint(b)
		default:
			l = protowire.ConsumeFieldValue(num, typ, b)
		}
		if l < 0 {
			return fmt.Errorf("range response field %d: %w", num, protowire.ParseError(l))
		}
		b = b[l:]
		if typ == protowire.BytesType || typ == protowire.VarintType {
			if err := f(num, typ, v, n); err != nil {
				return err
			}
		}
	}
	return nil
}
