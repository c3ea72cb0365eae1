package etcdschema

import "time"

// parseTime is time.Time's UnmarshalText (what encoding/json does with a
// time's string), reading the form Berth writes — UTC, "Z", zero to nine
// digits of fraction ("2006-01-02T15:04:05.999999999Z") — itself and
// leaving every other text to UnmarshalText. A cold start reads three to
// four timestamps per instance (3.5 million at 100,000 hosts): the
// standard parse, its checks for the forms RFC 3339 allows and the
// strict re-parse it falls back on, took three times time.Date's cost.
// The value and the error are exactly UnmarshalText's
// (TestParseTimeMatchesUnmarshalText, FuzzParseTime).
func parseTime(s []byte) (time.Time, error) {
	if t, ok := parseUTCTime(s); ok {
		return t, nil
	}
	var t time.Time
	err := t.UnmarshalText(s)
	return t, err
}

// parseUTCTime reads "YYYY-MM-DDTHH:MM:SS[.F{1,9}]Z" with every field in
// the range the standard parse accepts (the day within its month); it
// reports false for anything else, which parseTime leaves to
// UnmarshalText.
func parseUTCTime(s []byte) (time.Time, bool) {
	const base = len("2006-01-02T15:04:05")
	if len(s) < base+1 || s[len(s)-1] != 'Z' {
		return time.Time{}, false
	}
	_ = s[base-1] // one bounds check for the fields
	if s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	century, ok1 := twoDigits(s[0], s[1])
	yy, ok2 := twoDigits(s[2], s[3])
	month, ok3 := twoDigits(s[5], s[6])
	day, ok4 := twoDigits(s[8], s[9])
	hour, ok5 := twoDigits(s[11], s[12])
	minute, ok6 := twoDigits(s[14], s[15])
	sec, ok7 := twoDigits(s[17], s[18])
	year := century*100 + yy
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := s[base : len(s)-1]; len(frac) > 0 {
		// A dot and one to nine digits: more the standard parse
		// truncates, a form Berth does not write.
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		for _, c := range frac[1:] {
			if c-'0' > 9 {
				return time.Time{}, false
			}
			nsec = nsec*10 + int(c-'0')
		}
		nsec *= fracScale[len(frac)-1]
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC), true
}

// fracScale[n] turns n digits of fraction into nanoseconds.
var fracScale = [10]int{1e9, 1e8, 1e7, 1e6, 1e5, 1e4, 1e3, 1e2, 1e1, 1}

// twoDigits reads two decimal digits (a byte below '0' wraps past 9).
func twoDigits(a, b byte) (int, bool) {
	a, b = a-'0', b-'0'
	return int(a)*10 + int(b), a <= 9 && b <= 9
}

// daysIn is the number of days of month in year (proleptic Gregorian, as
// the time package counts).
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
