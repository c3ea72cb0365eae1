package bench

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/berth-project/berth/internal/rolelabel"
)

// The tool's own roles and the simulated fleet's, as their goroutines are
// labelled (rolelabel): what a profile of the measured phase lets the
// report take out of the whole process's CPU, so that what remains is
// Berth's.
var (
	toolRoles  = []string{"bench clients", "bench recorder", "bench etcd client"}
	fleetRoles = []string{"agent fleet", "agent fleet background"}
)

// roleShares is how a CPU profile's samples split by role: the share of
// the tool's roles and of the simulated fleet's in all the profile's CPU
// (unlabelled CPU, mostly the garbage collector, is left in the rest),
// and the garbage collector's own share, whatever the labels (gcFrames).
type roleShares struct {
	Total           time.Duration
	Tool, Fleet, GC float64
}

// gcFrames are the runtime functions a sample of the garbage collector's
// work has on its stack: background and assist marking, and sweeping
// (what docs/operations.md "Garbage collection" counts as GC CPU).
var gcFrames = map[string]bool{
	"runtime.gcBgMarkWorker": true,
	"runtime.gcAssistAlloc":  true,
	"runtime.bgsweep":        true,
}

// profileRoleShares reads a CPU profile as runtime/pprof writes it (a
// gzipped profile.proto) and sums its CPU by the role label.
func profileRoleShares(path string) (roleShares, error) {
	byRole, gc, err := profileCPU(path)
	if err != nil {
		return roleShares{}, err
	}
	var s roleShares
	for _, d := range byRole {
		s.Total += d
	}
	if s.Total <= 0 {
		return s, fmt.Errorf("profile %s: no CPU samples", path)
	}
	sum := func(roles []string) float64 {
		var d time.Duration
		for _, r := range roles {
			d += byRole[r]
		}
		return float64(d) / float64(s.Total)
	}
	s.Tool, s.Fleet = sum(toolRoles), sum(fleetRoles)
	s.GC = float64(gc) / float64(s.Total)
	return s, nil
}

// profileCPUByRole is the profile's CPU time per role label value (""
// for samples without one).
func profileCPUByRole(path string) (map[string]time.Duration, error) {
	byRole, _, err := profileCPU(path)
	return byRole, err
}

// profileCPU is the profile's CPU time per role label value and the
// garbage collector's CPU time (samples with a gcFrames function on their
// stack). Only the fields it needs of profile.proto are read: sample_type
// (1), sample (2: location_id 1, value 2, label 3 with key 1 and str 2),
// location (4: id 1, line 4 with function_id 1), function (5: id 1, name
// 2) and string_table (6).
func profileCPU(path string) (map[string]time.Duration, time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, 0, fmt.Errorf("profile %s: %w", path, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, 0, fmt.Errorf("profile %s: %w", path, err)
	}
	type sample struct {
		locations []uint64
		values    []int64
		labels    [][2]int64 // key, str: string table indexes
	}
	locFuncs := map[uint64][]uint64{} // location id: its lines' function ids
	funcNames := map[uint64]int64{}   // function id: name's string index
	var types []int64                 // sample_type's type: string table indexes
	var samples []sample
	var strs []string
	err = eachField(data, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 1:
			return eachField(v, func(num protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				if num == 1 {
					types = append(types, int64(x))
				}
				return nil
			})
		case 2:
			var s sample
			err := eachField(v, func(num protowire.Number, typ protowire.Type, b []byte, x uint64) error {
				switch num {
				case 1:
					return eachInt(typ, b, x, func(n int64) { s.locations = append(s.locations, uint64(n)) })
				case 2:
					return eachInt(typ, b, x, func(n int64) { s.values = append(s.values, n) })
				case 3:
					var kv [2]int64
					err := eachField(b, func(num protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
						if num == 1 || num == 2 {
							kv[num-1] = int64(x)
						}
						return nil
					})
					s.labels = append(s.labels, kv)
					return err
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case 4:
			var id uint64
			var fns []uint64
			err := eachField(v, func(num protowire.Number, _ protowire.Type, b []byte, x uint64) error {
				switch num {
				case 1:
					id = x
				case 4:
					return eachField(b, func(num protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
						if num == 1 {
							fns = append(fns, x)
						}
						return nil
					})
				}
				return nil
			})
			locFuncs[id] = fns
			return err
		case 5:
			var id uint64
			var name int64
			err := eachField(v, func(num protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				switch num {
				case 1:
					id = x
				case 2:
					name = int64(x)
				}
				return nil
			})
			funcNames[id] = name
			return err
		case 6:
			strs = append(strs, string(v))
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("profile %s: %w", path, err)
	}
	str := func(i int64) string {
		if i < 0 || int(i) >= len(strs) {
			return ""
		}
		return strs[i]
	}
	cpu := -1
	for i, t := range types {
		if str(t) == "cpu" {
			cpu = i
		}
	}
	if cpu < 0 {
		return nil, 0, fmt.Errorf("profile %s: not a CPU profile (no cpu sample type)", path)
	}
	isGC := func(s sample) bool {
		for _, loc := range s.locations {
			for _, fn := range locFuncs[loc] {
				if gcFrames[str(funcNames[fn])] {
					return true
				}
			}
		}
		return false
	}
	out := map[string]time.Duration{}
	var gc time.Duration
	for _, s := range samples {
		if cpu >= len(s.values) {
			continue
		}
		if isGC(s) {
			gc += time.Duration(s.values[cpu])
		}
		role := ""
		for _, kv := range s.labels {
			if str(kv[0]) == rolelabel.Key {
				role = str(kv[1])
			}
		}
		out[role] += time.Duration(s.values[cpu])
	}
	return out, gc, nil
}

// eachField calls fn with every field of a protobuf message: its number,
// wire type, and its bytes (length-delimited) or value (varint, fixed).
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var x32 uint32
			x32, n = protowire.ConsumeFixed32(b)
			x = uint64(x32)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// eachInt calls fn with each integer of a repeated int64 field, packed
// (one length-delimited run) or not (one varint).
func eachInt(typ protowire.Type, b []byte, x uint64, fn func(int64)) error {
	if typ != protowire.BytesType {
		fn(int64(x))
		return nil
	}
	for len(b) > 0 {
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		fn(int64(v))
		b = b[n:]
	}
	return nil
}
