package etcdschema

import "testing"

// keySink keeps the compiler from dropping the keys the benchmarks build.
var keySink string

// BenchmarkKeys measures the key functions on the boot path: every build
// writes a Build, a HostInstance, a Consumer and a Provider key, and every
// scheduler parses the host keys it follows.
func BenchmarkKeys(b *testing.B) {
	k := New("/berth")
	const host, uuid = "compute-0042.rack7.example.org", "6f1b2a52-8c0e-4c43-9f5a-0d6b4c7e9a11"
	b.Run("Build", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			keySink = k.Build(host, uuid)
		}
	})
	// The same key without the segment check: the check's price, measured
	// in the same run (the machine's load moves absolute figures).
	b.Run("Build-unchecked", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			keySink = k.concat([]string{"hosts", host, "builds", uuid})
		}
	})
	// The check alone, for the two variable segments of a Build key.
	b.Run("check-host-and-uuid", func(b *testing.B) {
		b.ReportAllocs()
		ok := true
		for i := 0; i < b.N; i++ {
			ok = cleanSegment(host) && cleanSegment(uuid) && ok
		}
		if !ok {
			b.Fatal("clean segments reported unclean")
		}
	})
	b.Run("HostInstance", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			keySink = k.HostInstance(host, uuid)
		}
	})
	b.Run("Consumer", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			keySink = k.Consumer(uuid)
		}
	})
	b.Run("ServerGroupSlot", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			keySink = k.ServerGroupSlot(uuid, host, 3)
		}
	})
	b.Run("ParseHostKey", func(b *testing.B) {
		key := k.HostInstance(host, uuid)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			h, _, _ := k.ParseHostKey(key)
			keySink = h
		}
	})
}
