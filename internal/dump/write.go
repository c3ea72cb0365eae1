package dump

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// Document is the JSON dump: one object with the snapshot's revision, the
// summary, every entry grouped by kind, and the unknown keys.
type Document struct {
	Prefix   string    `json:"prefix"`
	Revision int64     `json:"revision"`
	TakenAt  time.Time `json:"taken_at"`
	Summary  Summary   `json:"summary"`
	// Etcd is etcd's view of its own cluster (members, endpoint status).
	Etcd    *Cluster               `json:"etcd,omitempty"`
	Kinds   map[string][]EntryJSON `json:"kinds"`
	Unknown []EntryJSON            `json:"unknown"`
	// Errors repeats the undecodable keys with their errors, so a reader
	// finds them without scanning every kind.
	Errors []EntryJSON `json:"undecodable"`
}

// EntryJSON is one key in the JSON dump. A decoded value is under Value; a
// value that did not decode is under Raw (a string when it is UTF-8, else
// RawBase64) with Error beside it.
type EntryJSON struct {
	Key            string `json:"key"`
	Value          any    `json:"value,omitempty"`
	Raw            string `json:"raw,omitempty"`
	RawBase64      string `json:"raw_base64,omitempty"`
	Error          string `json:"error,omitempty"`
	CreateRevision int64  `json:"create_revision"`
	ModRevision    int64  `json:"mod_revision"`
	Lease          string `json:"lease,omitempty"` // hex, as etcdctl and election keys spell it
}

func entryJSON(e Entry, withRaw bool) EntryJSON {
	out := EntryJSON{Key: e.Key, CreateRevision: e.CreateRevision, ModRevision: e.ModRevision}
	if e.Lease != 0 {
		out.Lease = fmt.Sprintf("%x", e.Lease)
	}
	if e.Err != nil {
		out.Error = e.Err.Error()
		withRaw = true
	} else {
		out.Value = e.Value
	}
	if withRaw {
		if utf8.Valid(e.Raw) {
			out.Raw = string(e.Raw)
		} else {
			out.RawBase64 = base64.StdEncoding.EncodeToString(e.Raw)
		}
	}
	return out
}

// Document builds the JSON dump of the snapshot.
func (s *Snapshot) Document() Document {
	d := Document{Prefix: s.Prefix, Revision: s.Revision, TakenAt: s.TakenAt, Summary: s.Summarize(), Etcd: s.Cluster,
		Kinds: map[string][]EntryJSON{}, Unknown: []EntryJSON{}, Errors: []EntryJSON{}}
	for _, e := range s.Entries {
		g := Group(e.Parsed.Kind)
		d.Kinds[g] = append(d.Kinds[g], entryJSON(e, false))
		if e.Err != nil {
			d.Errors = append(d.Errors, EntryJSON{Key: e.Key, Error: e.Err.Error()})
		}
	}
	for _, e := range s.Unknown {
		u := entryJSON(e, true)
		u.Error = "" // the parse error only says no pattern matched
		d.Unknown = append(d.Unknown, u)
	}
	return d
}

// WriteJSON writes the snapshot as one indented JSON object.
func WriteJSON(w io.Writer, s *Snapshot) error {
	b, err := json.MarshalIndent(s.Document(), "", "  ")
	if err != nil {
		return fmt.Errorf("encode dump: %w", err)
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// statusOrder puts Nova's status words first, in lifecycle order.
var statusOrder = []string{"BUILD", "ACTIVE", "ERROR", "DELETED"}

// WriteTable writes the summary as tables.
func WriteTable(w io.Writer, s *Snapshot) error {
	sum := s.Summarize()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("berth state under %s at etcd revision %d (%s): %d keys, %d undecodable, %d unknown\n\n",
		s.Prefix, s.Revision, s.TakenAt.Format(time.RFC3339), sum.Keys, sum.Undecodable, sum.Unknown)

	p("KIND\tCOUNT\n")
	var kinds []string
	for g := range sum.Counts {
		kinds = append(kinds, g)
	}
	sort.Strings(kinds)
	for _, g := range kinds {
		p("%s\t%d\n", g, sum.Counts[g])
	}

	p("\nHOST\tCELL\tSTATE\tSTATUS\tINSTANCES\tBUILDS\tVCPU\tMEMORY_MB\tDISK_GB\n")
	use := func(h HostSummary, rc string) string {
		r, ok := h.Resources[rc]
		if !ok {
			return "-"
		}
		return fmt.Sprintf("%d/%d", r.Used, r.Capacity)
	}
	for _, h := range sum.Hosts {
		cellName := dash(h.Cell)
		if !h.Mapped {
			cellName += " (unmapped)"
		}
		state := h.State
		if h.ForcedDown {
			state += " (forced)"
		}
		if h.DownSince != nil {
			state += " since " + h.DownSince.Format(time.RFC3339)
		}
		status := h.Status
		if !h.Service {
			status = "no service record"
		} else if h.DisabledReason != "" {
			status += " (" + h.DisabledReason + ")"
		}
		builds := fmt.Sprint(h.Builds)
		if h.Deletes > 0 {
			builds += fmt.Sprintf(" +%d delete", h.Deletes)
		}
		p("%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", h.Host, cellName, state, status, h.Instances, builds,
			use(h, "VCPU"), use(h, "MEMORY_MB"), use(h, "DISK_GB"))
	}

	statuses := append([]string(nil), statusOrder...)
	for _, c := range sum.Cells {
		for st := range c.Instances {
			if !contains(statuses, st) {
				statuses = append(statuses, st)
			}
		}
	}
	p("\nCELL\tHOSTS\tDISABLED\t%s\tRETRIES\n", strings.Join(statuses, "\t"))
	for _, c := range sum.Cells {
		name := c.Cell
		if !c.Record {
			name += " (no record)"
		}
		var counts []string
		for _, st := range statuses {
			counts = append(counts, fmt.Sprint(c.Instances[st]))
		}
		p("%s\t%d\t%v\t%s\t%d (%d leased)\n", name, c.Hosts, c.Disabled, strings.Join(counts, "\t"), c.Retries, c.RetriesLeased)
	}

	f := sum.InFlight
	p("\nIN FLIGHT\t\n")
	p("build requests\t%d (%d leased by a superconductor)\n", f.BuildRequests, f.BuildRequestsLeased)
	p("casts to hosts\t%d build, %d delete\n", f.Builds, f.Deletes)
	p("retries\t%d (%d leased by a cell conductor)\n", f.Retries, f.RetriesLeased)
	p("alternates lists\t%d\n", f.Alternates)

	p("\nLEADER\tID\tKEY\tCANDIDATES\n")
	if len(sum.Leaders) == 0 {
		p("(none)\t-\t-\t0\n")
	}
	for _, l := range sum.Leaders {
		p("%s\t%s\t%s\t%d\n", l.Role, l.ID, l.Key, l.Candidates)
	}

	p("\nMEMBER\tID\tURL\n")
	var roles []string
	for r := range sum.Members {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	for _, r := range roles {
		for _, m := range sum.Members[r] {
			p("%s\t%s\t%s\n", r, m.ID, dash(m.URL))
		}
	}

	if cl := s.Cluster; cl != nil {
		p("\nETCD MEMBER\tID\tCLIENT URLS\tLEADER\n")
		if cl.Error != "" {
			p("(%s)\t-\t-\t-\n", oneLine(cl.Error))
		}
		for _, m := range cl.Members {
			name := dash(m.Name)
			if m.Learner {
				name += " (learner)"
			}
			p("%s\t%s\t%s\t%v\n", name, m.ID, dash(strings.Join(m.ClientURLs, ",")), m.Leader)
		}
		p("\nETCD ENDPOINT\tVERSION\tDB SIZE\tRAFT TERM\tRAFT INDEX\tERROR\n")
		for _, e := range cl.Endpoints {
			errText := e.Error
			if errText == "" {
				errText = strings.Join(e.Alarms, "; ")
			}
			p("%s\t%s\t%d\t%d\t%d\t%s\n", e.Endpoint, dash(e.Version), e.DBSize, e.RaftTerm, e.RaftIndex, dash(oneLine(errText)))
		}
	}

	if bad := s.Undecodable(); len(bad) > 0 {
		p("\nUNDECODABLE\tERROR\n")
		for _, e := range bad {
			p("%s\t%s\n", e.Key, oneLine(e.Err.Error()))
		}
	}
	if len(s.Unknown) > 0 {
		p("\nUNKNOWN KEY\tBYTES\n")
		for _, e := range s.Unknown {
			p("%s\t%d\n", e.Key, len(e.Raw))
		}
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
