package scheduler

import (
	"encoding/json"
	"slices"
	"strconv"
	"unsafe"

	"github.com/berth-project/berth/placement"
)

// allocationRequestJSON is json.Marshal(c.AllocationRequest()), byte for
// byte, written directly for the usual candidate: one part whose provider
// and classes are plain names (letters, digits, '_' and '-', which JSON
// writes unescaped). Every Selection of every request carries its
// allocation request as JSON (the claimed host's and each alternate's);
// going through the map and reflection was most of building them. Other
// candidates go through json.Marshal.
func allocationRequestJSON(c placement.Candidate) string {
	if len(c.Parts) != 1 || c.Parts[0].Resources == nil || !plainJSONName(c.Parts[0].Provider) {
		return marshalAllocationRequest(c) // (nil resources are written null)
	}
	res := c.Parts[0].Resources
	var names [8]string
	rcs := names[:0]
	for rc := range res {
		if !plainJSONName(rc) {
			return marshalAllocationRequest(c)
		}
		rcs = append(rcs, rc)
	}
	slices.Sort(rcs) // encoding/json writes a map's keys sorted
	b := make([]byte, 0, 64+len(c.Parts[0].Provider)+24*len(rcs))
	b = append(b, `{"allocations":{"`...)
	b = append(b, c.Parts[0].Provider...)
	b = append(b, `":{"resources":{`...)
	for i, rc := range rcs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, rc...)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, res[rc], 10)
	}
	b = append(b, `}}}}`...)
	// b is written no more: the string shares its bytes, as
	// strings.Builder's does, instead of copying them (a request makes
	// max_attempts of these per instance).
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func marshalAllocationRequest(c placement.Candidate) string {
	b, _ := json.Marshal(c.AllocationRequest())
	return string(b)
}

// plainJSONName says whether JSON writes s as is between quotes.
func plainJSONName(s string) bool {
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9', ch == '_', ch == '-':
		default:
			return false
		}
	}
	return true
}
