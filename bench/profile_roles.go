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
// (unlabelled CPU, mostly the garbage collector, is left in the rest).
type roleShares struct {
	Total       time.Duration
	Tool, Fleet float64
}

// profileRoleShares reads a CPU profile as runtime/pprof writes it (a
// gzipped profile.proto) and sums its CPU by the role label.
func profileRoleShares(path string) (roleShares, error) {
	byRole, err := profileCPUByRole(path)
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
	return s, nil
}

// profileCPUByRole is the profile's CPU time per role label value (""
// for samples without one). Only the fields it needs of profile.proto are
// read: sample_type (1), sample (2: value 2, label 3 with key 1 and str
// 2) and string_table (6).
func profileCPUByRole(path string) (map[string]time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", path, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", path, err)
	}
	type sample struct {
		values []int64
		labels [][2]int64 // key, str: string table indexes
	}
	var types []int64 // sample_type's type: string table indexes
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
		case 6:
			strs = append(strs, string(v))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", path, err)
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
		return nil, fmt.Errorf("profile %s: not a CPU profile (no cpu sample type)", path)
	}
	out := map[string]time.Duration{}
	for _, s := range samples {
		if cpu >= len(s.values) {
			continue
		}
		role := ""
		for _, kv := range s.labels {
			if str(kv[0]) == rolelabel.Key {
				role = str(kv[1])
			}
		}
		out[role] += time.Duration(s.values[cpu])
	}
	return out, nil
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
