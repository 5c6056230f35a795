package egress

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/docker-sandbox/docker-sandbox/egress/iprules"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
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
	// private are the private addresses allowed requests needed.
	private []string
}

// Summary is `egress logs --summary`: what was allowed and denied, and
// for each scope the policy command that allows exactly what it used.
type Summary struct {
	Allowed []SummaryEntry `json:"allowed"`
	Denied  []SummaryEntry `json:"denied"`
	// Suggested maps a scope to an `egress policy` command allowing the
	// hosts and ports it reached, and the private addresses their answers
	// held (learn with --allow '*' and --allow-cidr, then enforce).
	Suggested map[string]string `json:"suggested"`
	// Rules are the suggested policies themselves.
	Rules map[string]policy.Rules `json:"rules"`
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
		if rec.Decision == proxy.Allow {
			for _, ip := range rec.PrivateIPs {
				if !contains(e.private, ip) {
					e.private = append(e.private, ip)
				}
			}
		}
		if rec.Time.After(e.Last) {
			e.Last = rec.Time
		}
	}
	if err := sc.Err(); err != nil {
		return Summary{}, err
	}
	s := Summary{Allowed: sorted(allowed), Denied: sorted(denied), Suggested: map[string]string{}, Rules: map[string]policy.Rules{}}
	type acc struct {
		hosts, cidrs []string
		ports        []int
	}
	per := map[string]*acc{}
	for _, e := range s.Allowed {
		if !policy.ValidScope(e.Scope) {
			continue
		}
		a := per[e.Scope]
		if a == nil {
			a = &acc{}
			per[e.Scope] = a
		}
		h, err := policy.ParseHost(e.Host)
		if err != nil || e.Port < 1 || e.Port > 65535 {
			continue // not a target the proxy could have allowed
		}
		// A private address (a literal, or among a name's answers) was
		// allowed only through allow_cidrs: each is listed (a name's
		// answers must all be). A private literal needs nothing else.
		for _, ip := range e.private {
			if a, err := netip.ParseAddr(ip); err == nil {
				p := netip.PrefixFrom(a, a.BitLen()).String()
				if !contains(per[e.Scope].cidrs, p) {
					per[e.Scope].cidrs = append(per[e.Scope].cidrs, p)
				}
			}
		}
		if !(h.IsLiteral() && iprules.Classify(h.Addr).Class == iprules.Private) && !contains(a.hosts, h.String()) {
			a.hosts = append(a.hosts, h.String())
		}
		if !containsInt(a.ports, e.Port) {
			a.ports = append(a.ports, e.Port)
		}
	}
	for sc, a := range per {
		r, err := policy.Rules{Allow: a.hosts, AllowPorts: a.ports, AllowCIDRs: a.cidrs}.Normalize()
		if err != nil {
			continue
		}
		s.Rules[sc] = r
		s.Suggested[sc] = suggestCommand(sc, r)
	}
	return s, nil
}

// suggestCommand is the `egress policy` command that sets r, with every
// port listed (exactly those used, not the default 80 and 443).
func suggestCommand(scope string, r policy.Rules) string {
	var b strings.Builder
	b.WriteString("docker sandbox egress policy " + scope)
	for _, h := range r.Allow {
		b.WriteString(" --allow " + shellQuote(h))
	}
	for _, p := range r.AllowPorts {
		fmt.Fprintf(&b, " --allow-port %d", p)
	}
	for _, c := range r.AllowCIDRs {
		b.WriteString(" --allow-cidr " + shellQuote(c))
	}
	return b.String()
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
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
