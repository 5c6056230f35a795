package config

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Binary size units.
const (
	KiB int64 = 1 << 10
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
	TiB int64 = 1 << 40
)

const (
	sizeHint     = "(use e.g. 512m, 1g)"
	durationHint = "(use e.g. 90s, 10m, 1h30m)"
)

// sizeRE: optional sign, digits, optional fraction, optional unit k/m/g/t,
// optional "b" or "ib". Case-insensitive; blanks are allowed before the unit.
var sizeRE = regexp.MustCompile(`(?i)^([+-]?)([0-9]+)(?:\.([0-9]+))?[ \t]*([kmgt]?)(i?b)?$`)

// ParseSize parses a size in bytes: a plain integer ("1048576") or a number
// with a binary unit, k, m, g or t, optionally followed by "b" or "ib", in any
// case ("64k", "512m", "1g", "1GiB", "128MiB", "1.5g"). Negative sizes are
// refused.
func ParseSize(s string) (int64, error) {
	n, p := parseSizeSigned(s)
	if p == nil && n < 0 {
		p = &problem{pred: "must not be negative"}
	}
	if p != nil {
		return 0, fmt.Errorf("%q %s", s, p.pred)
	}
	return n, nil
}

// ParseDuration parses a Go duration string ("90s", "10m", "1h30m"; "0" is
// zero). Negative durations are refused.
func ParseDuration(s string) (time.Duration, error) {
	d, p := parseDurationSigned(s)
	if p == nil && d < 0 {
		p = &problem{pred: "must not be negative"}
	}
	if p != nil {
		return 0, fmt.Errorf("%q %s", s, p.pred)
	}
	return d, nil
}

// parseSizeSigned is ParseSize without the sign check, so that a negative
// value reaches the key's range check and gets its message
// ("must be at least 6MiB").
func parseSizeSigned(s string) (int64, *problem) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, &problem{pred: "is not a size " + sizeHint}
	}
	sign, whole, frac, unit, suffix := m[1], m[2], m[3], strings.ToLower(m[4]), strings.ToLower(m[5])
	mult := int64(1)
	switch unit {
	case "k":
		mult = KiB
	case "m":
		mult = MiB
	case "g":
		mult = GiB
	case "t":
		mult = TiB
	}
	if unit == "" && (suffix == "ib" || frac != "") {
		// "12ib" has no unit to be binary; "1.5" or "1.5b" would be a
		// fraction of a byte.
		return 0, &problem{pred: "is not a size " + sizeHint}
	}
	tooLarge := &problem{pred: "is too large"}
	w, err := strconv.ParseUint(whole, 10, 63)
	if err != nil || int64(w) > math.MaxInt64/mult {
		return 0, tooLarge
	}
	n := int64(w) * mult
	if frac != "" {
		f, err := strconv.ParseFloat("0."+frac, 64)
		if err != nil {
			return 0, &problem{pred: "is not a size " + sizeHint}
		}
		add := int64(f * float64(mult))
		if n > math.MaxInt64-add {
			return 0, tooLarge
		}
		n += add
	}
	if sign == "-" {
		n = -n
	}
	return n, nil
}

// parseDurationSigned is ParseDuration without the sign check.
func parseDurationSigned(s string) (time.Duration, *problem) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, &problem{pred: "is not a duration " + durationHint}
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		if _, nerr := strconv.ParseFloat(t, 64); nerr == nil {
			return 0, &problem{pred: "is not a duration: a unit is missing " + durationHint}
		}
		return 0, &problem{pred: "is not a duration " + durationHint}
	}
	return d, nil
}

// formatSize renders n for messages: the largest binary unit that divides it
// exactly ("6MiB", "16GiB"), or bytes.
func formatSize(n int64) string {
	units := []struct {
		name string
		size int64
	}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}}
	for _, u := range units {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	if n == 1 || n == -1 {
		return strconv.FormatInt(n, 10) + " byte"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// formatDuration renders d for messages without trailing zero units
// ("1h" rather than "1h0m0s").
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
