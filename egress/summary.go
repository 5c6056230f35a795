package egress

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/docker-sandbox/docker-sandbox/egress/proxy"
)

// SummaryEntry is one distinct (scope, host, port, decision) of the log.
type SummaryEntry struct {
	Scope string    `json:"scope"`
	Host  string    `json:"host"`
	Port  int       `json:"port"`
	Count int       `json:"count"`
	Codes []string  `json:"codes"`
	IPs   []string  `json:"ips"`
	Last  time.Time `json:"last"`
}

// Summary is `egress logs --summary`: what was allowed and denied, and
// for each scope the policy command that allows exactly what it used.
type Summary struct {
	Allowed []SummaryEntry `json:"allowed"`
	Denied  []SummaryEntry `json:"denied"`
	// Suggested maps a scope to an `egress policy` command allowing the
	// hosts and ports it reached (learn with --allow '*', then enforce).
	Suggested map[string]string `json:"suggested"`
}

type sumKey struct {
	scope, host string
	port        int
}

// Summarize reads decision records (JSON lines) and aggregates them.
// Lines that are not records are skipped.
func Summarize(r io.Reader, scope string) (Summary, error) {
	allowed, denied := map[sumKey]*SummaryEntry{}, map[sumKey]*SummaryEntry{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var rec proxy.Record
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Decision == "" {
			continue
		}
		if scope != "" && rec.Scope != scope {
			continue
		}
		m := denied
		if rec.Decision == proxy.Allow {
			m = allowed
		}
		k := sumKey{rec.Scope, rec.Host, rec.Port}
		e := m[k]
		if e == nil {
			e = &SummaryEntry{Scope: rec.Scope, Host: rec.Host, Port: rec.Port, Codes: []string{}, IPs: []string{}}
			m[k] = e
		}
		e.Count++
		if !contains(e.Codes, rec.Code) {
			e.Codes = append(e.Codes, rec.Code)
		}
		if rec.IP != "" && !contains(e.IPs, rec.IP) && len(e.IPs) < 16 {
			e.IPs = append(e.IPs, rec.IP)
		}
		if rec.Time.After(e.Last) {
			e.Last = rec.Time
		}
	}
	if err := sc.Err(); err != nil {
		return Summary{}, err
	}
	s := Summary{Allowed: sorted(allowed), Denied: sorted(denied), Suggested: map[string]string{}}
	hosts, ports := map[string][]string{}, map[string]map[int]bool{}
	for _, e := range s.Allowed {
		if e.Scope == "" {
			continue
		}
		if !contains(hosts[e.Scope], e.Host) {
			hosts[e.Scope] = append(hosts[e.Scope], e.Host)
		}
		if ports[e.Scope] == nil {
			ports[e.Scope] = map[int]bool{}
		}
		ports[e.Scope][e.Port] = true
	}
	for sc, hs := range hosts {
		sort.Strings(hs)
		cmd := "docker sandbox egress policy " + sc
		for _, h := range hs {
			cmd += " --allow " + shellQuote(h)
		}
		var ps []int
		custom := false
		for p := range ports[sc] {
			ps = append(ps, p)
			if p != 80 && p != 443 {
				custom = true
			}
		}
		if custom {
			sort.Ints(ps)
			for _, p := range ps {
				cmd += fmt.Sprintf(" --allow-port %d", p)
			}
		}
		s.Suggested[sc] = cmd
	}
	return s, nil
}

func sorted(m map[sumKey]*SummaryEntry) []SummaryEntry {
	out := make([]SummaryEntry, 0, len(m))
	for _, e := range m {
		sort.Strings(e.Codes)
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Scope != b.Scope {
			return a.Scope < b.Scope
		}
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		return a.Port < b.Port
	})
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func shellQuote(s string) string {
	if strings.ContainsAny(s, "*?[]$`\"'\\ ") {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}
