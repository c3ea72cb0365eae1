package placement

// slotSet is a set of index slots that keeps the order they were first
// added in. An answer notes the roots and providers its allocation
// requests use in one (a map per answer was a tenth of render), and
// summarises them in that order: the search's, which for a watch-fed
// index is close to creation order, so the summaries' sort into
// Placement's order finds them nearly sorted.
type slotSet struct {
	bits  []uint64
	order []int32
}

// newSlotSet is a set over nslots slots, sized for about hint members.
func newSlotSet(nslots, hint int) slotSet {
	return slotSet{bits: make([]uint64, (nslots+63)/64), order: make([]int32, 0, hint)}
}

// add puts slot in the set, unless it is there.
func (s *slotSet) add(slot int32) {
	w, b := slot>>6, uint(slot&63)
	if s.bits[w]&(1<<b) != 0 {
		return
	}
	s.bits[w] |= 1 << b
	s.order = append(s.order, slot)
}

// reset empties s for a set over nslots slots, keeping its arrays when
// they are large enough: only the words of the members are cleared, so
// reusing a set over 100,000 slots costs its members, not its slots.
func (s *slotSet) reset(nslots, hint int) {
	words := (nslots + 63) / 64
	for _, slot := range s.order {
		if int(slot>>6) < len(s.bits) {
			s.bits[slot>>6] = 0
		}
	}
	if cap(s.bits) < words {
		s.bits = make([]uint64, words)
	} else {
		s.bits = s.bits[:words]
	}
	if cap(s.order) < hint {
		s.order = make([]int32, 0, hint)
	} else {
		s.order = s.order[:0]
	}
}
