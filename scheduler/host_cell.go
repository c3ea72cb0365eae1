package scheduler

import "sync"

// A host's cell is its host mapping's (hm.cells), else its service's. The
// mapping was a lookup in a map keyed by the host's name for every
// candidate of every request; then a per-record memo of that lookup,
// valid for one generation of the mappings. But every mapping written
// (each host registering) moved the generation on, so in a boot every
// record's memo was stale when the requests began, and with requests
// spread over the cloud (100 candidates from a random start) a host is a
// candidate only a few times per 100,000-host boot: a third of the
// candidates paid the lookup, a few cache misses each (0.12 s of the
// superconductor's 1.17 s over 3,000 servers). So each record holds its
// mapping's cell itself (hostRecord.mappedCell), written under the write
// lock wherever a mapping or a record changes: a mapping's event sets its
// host's record, a new record reads the mappings, and a list of either
// sets every record (setMappedCellsLocked). A view reads the record only.

// cellNames interns the cells' names, which are few, so that every host's
// mapping shares one string per cell (hot in the cache).
var cellNames sync.Map // string -> *string

func internCell(cell string) *string {
	if p, ok := cellNames.Load(cell); ok {
		return p.(*string)
	}
	name := cell // a copy: taking cell's address would move it to the heap on every call
	p, _ := cellNames.LoadOrStore(name, &name)
	return p.(*string)
}

// cellOf is r's cell: its host mapping's, else its service's ("" with
// neither); the caller holds the host manager's lock (read or write).
func cellOf(r *hostRecord) string {
	if r.mappedCell == "" && r.service != nil {
		return r.service.Cell
	}
	return r.mappedCell
}

// setMappedCellsLocked sets every record's mapped cell from the mappings;
// the caller holds the write lock (or has the records to itself and the
// read lock).
func setMappedCellsLocked(hosts map[string]*hostRecord, cells map[string]string) {
	for name, r := range hosts {
		r.mappedCell = cells[name]
	}
}
