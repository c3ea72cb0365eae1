package bench

import (
	"slices"
	"time"

	"github.com/berth-project/berth/etcdschema"
)

// moveStages splits confirmed moves' times by their migration records'
// events (Nova's instance action events: conductor_migrate_server, then
// compute_prep_resize, compute_resize_instance, compute_finish_resize on
// the hosts, then compute_confirm_resize): each stage is the time from
// the previous event's finish (the request's for the first) to this
// event's finish, so it includes the cast's delivery and any queue in
// front of the step. "confirm asked" is from the last step before it to
// the confirm's request (a drain's own confirm, or the client's). The
// stages of every move add up to its time.
type moveStages map[string][]time.Duration

func (s moveStages) add(m *etcdschema.Migration) {
	prev := m.CreatedAt
	for _, ev := range m.Events {
		if ev.Event == "compute_confirm_resize" && m.ConfirmedAt != nil {
			s["confirm asked"] = append(s["confirm asked"], m.ConfirmedAt.Sub(prev))
			prev = *m.ConfirmedAt
		}
		s[ev.Event] = append(s[ev.Event], ev.Finish.Sub(prev))
		prev = ev.Finish
	}
}

// pcts sorts each stage's times and returns their percentiles.
func (s moveStages) pcts() map[string]Pct {
	out := make(map[string]Pct, len(s))
	for name, v := range s {
		slices.Sort(v)
		out[name] = pct(v)
	}
	return out
}

// moveStageOrder is the order the stages are printed in.
var moveStageOrder = []string{etcdschema.EventScheduleMove, "compute_prep_resize", "compute_resize_instance",
	"compute_finish_resize", "confirm asked", "compute_confirm_resize"}
