// Package rendezvous is the hash Berth ranks by where every process must
// agree without talking: which superconductor queue holder serves a
// build request first (conductor), and in which order an instance takes
// hosts of exactly equal weight (scheduler). FNV-1a over the strings,
// finished with splitmix64's mixer, since FNV alone leaves strings that
// differ in their last byte (host-00017, host-00018) with weights alike
// in their high bits. The values are part of the queue's protocol:
// processes of different versions must compute the same ones.
package rendezvous

const (
	offset = 14695981039346656037
	prime  = 1099511628211
)

// Offset is the FNV-1a start value, the h of a first Add.
const Offset uint64 = offset

// Add folds s into the FNV-1a hash h.
func Add(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}

// Mix is splitmix64's finaliser: every input bit reaches every output
// bit.
func Mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// Weight is the rendezvous weight of item for holder: the holder with the
// highest weight serves the item first. A separator byte keeps ("ab",
// "c") and ("a", "bc") apart.
func Weight(item, holder string) uint64 {
	return Mix(Add(Add(Add(Offset, item), "\xff"), holder))
}
