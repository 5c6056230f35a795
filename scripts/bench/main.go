// Command bench times commands for scripts/bench.sh: it runs each benchmark's
// commands interleaved (A B A B ...), N times each after some warm-ups, and
// prints the median and p90 of each and the ratio of medians against the
// group's anchor (the plain docker command the plugin is compared with).
//
// Usage (flags are read in order; each one applies to the group, anchor or
// case opened last):
//
//	bench [-json FILE] \
//	  -group NAME [-n N] [-warmup N] \
//	    -anchor LABEL -cmd CMD [-after CMD] \
//	    -case NAME -cmd CMD [-after CMD] [-target RATIO] \
//	    -case ...
//	  -group ...
//
// CMD is one command line, split like a shell does (blanks separate words;
// '...', "..." and backslash quote), never run through a shell, so that the
// timings hold nothing but the command itself. "{i}" in CMD or -after is
// replaced by the iteration number of that command (1, 2, ..., warm-ups
// included), for a fresh name per run. -after runs right after each run of
// its command, outside the timed part (e.g. removing what the run created).
// A failing timed command stops the benchmark (exit 1) with its stderr.
//
// Times are wall-clock, time.Now around os/exec's Run: they include starting
// the process, as a shell user would see them.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
)

// interrupted is set on SIGINT or SIGTERM (which also reach the running
// command through the process group): the benchmark stops with exit 130 or
// 143 instead of reporting the killed command as a failure.
var interrupted atomic.Int32

type command struct {
	Label  string   `json:"name"`
	Argv   []string `json:"argv"`
	After  []string `json:"after,omitempty"`
	Target float64  `json:"target,omitempty"` // max ratio of medians vs the anchor; 0 = none

	samples []time.Duration
	runs    int
}

type group struct {
	Name   string
	N      int
	Warmup int
	Anchor *command
	Cases  []*command
}

type stats struct {
	N        int       `json:"n"`
	MedianMS float64   `json:"median_ms"`
	P90MS    float64   `json:"p90_ms"`
	MinMS    float64   `json:"min_ms"`
	MaxMS    float64   `json:"max_ms"`
	Samples  []float64 `json:"samples_ms"`
}

type result struct {
	Group     string   `json:"group"`
	Benchmark string   `json:"benchmark"`
	Command   []string `json:"command"`
	stats
	Anchor        string   `json:"anchor"`
	AnchorCommand []string `json:"anchor_command"`
	AnchorStats   stats    `json:"anchor_stats"`
	Ratio         float64  `json:"ratio"`
	Target        *float64 `json:"target"`
	Pass          *bool    `json:"pass"`
}

type report struct {
	Started      time.Time `json:"started"`
	DurationS    float64   `json:"duration_s"`
	CPUs         int       `json:"cpus"`
	LoadBefore   string    `json:"loadavg_before"`
	LoadAfter    string    `json:"loadavg_after"`
	Results      []result  `json:"results"`
	AllPass      bool      `json:"all_pass"`
	TargetsTotal int       `json:"targets"`
	TargetsMet   int       `json:"targets_met"`
}

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		code := int32(130)
		if sig == syscall.SIGTERM {
			code = 143
		}
		interrupted.Store(code)
	}()
	err := run(os.Args[1:])
	if code := interrupted.Load(); code != 0 {
		fmt.Fprintln(os.Stderr, "bench: interrupted")
		os.Exit(int(code))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var (
		jsonFile string
		groups   []*group
		last     *command // the anchor or case opened last
		lastCase bool     // last is a case, not an anchor
	)
	cur := func(flagName string) (*group, error) {
		if len(groups) == 0 {
			return nil, fmt.Errorf("-%s before any -group", flagName)
		}
		return groups[len(groups)-1], nil
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&jsonFile, "json", "", "also write the results as JSON to `FILE`")
	fs.Func("group", "start a benchmark group `NAME`", func(s string) error {
		groups = append(groups, &group{Name: s, N: 10, Warmup: 1})
		last, lastCase = nil, false
		return nil
	})
	fs.Func("n", "timed runs of each command of the group", func(s string) error {
		g, err := cur("n")
		if err != nil {
			return err
		}
		g.N, err = strconv.Atoi(s)
		if err == nil && g.N < 1 {
			err = errors.New("must be at least 1")
		}
		return err
	})
	fs.Func("warmup", "untimed runs of each command before the timed ones", func(s string) error {
		g, err := cur("warmup")
		if err != nil {
			return err
		}
		g.Warmup, err = strconv.Atoi(s)
		if err == nil && g.Warmup < 0 {
			err = errors.New("must not be negative")
		}
		return err
	})
	fs.Func("anchor", "the group's reference command `LABEL` (follow with -cmd)", func(s string) error {
		g, err := cur("anchor")
		if err != nil {
			return err
		}
		if g.Anchor != nil {
			return fmt.Errorf("group %q has two anchors", g.Name)
		}
		g.Anchor = &command{Label: s}
		last, lastCase = g.Anchor, false
		return nil
	})
	fs.Func("case", "a benchmark `NAME` of the group (follow with -cmd)", func(s string) error {
		g, err := cur("case")
		if err != nil {
			return err
		}
		c := &command{Label: s}
		g.Cases = append(g.Cases, c)
		last, lastCase = c, true
		return nil
	})
	fs.Func("cmd", "the command line of the last -anchor or -case", func(s string) error {
		if last == nil {
			return errors.New("-cmd needs an -anchor or -case before it")
		}
		argv, err := splitWords(s)
		if err != nil {
			return err
		}
		if len(argv) == 0 {
			return errors.New("empty command")
		}
		last.Argv = argv
		return nil
	})
	fs.Func("after", "an untimed command run after each run of the last -anchor or -case", func(s string) error {
		if last == nil {
			return errors.New("-after needs an -anchor or -case before it")
		}
		argv, err := splitWords(s)
		if err != nil {
			return err
		}
		last.After = argv
		return nil
	})
	fs.Func("target", "the largest acceptable ratio of medians (case / anchor)", func(s string) error {
		if !lastCase {
			return errors.New("-target needs a -case before it")
		}
		v, err := strconv.ParseFloat(s, 64)
		if err == nil && v <= 0 {
			err = errors.New("must be positive")
		}
		last.Target = v
		return err
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if len(groups) == 0 {
		return errors.New("no -group given")
	}
	for _, g := range groups {
		if g.Anchor == nil || len(g.Cases) == 0 {
			return fmt.Errorf("group %q needs an -anchor and at least one -case", g.Name)
		}
		for _, c := range append([]*command{g.Anchor}, g.Cases...) {
			if len(c.Argv) == 0 {
				return fmt.Errorf("group %q: %q has no -cmd", g.Name, c.Label)
			}
		}
	}

	rep := report{Started: time.Now().UTC(), CPUs: runtime.NumCPU(), LoadBefore: loadavg()}
	t0 := time.Now()
	for _, g := range groups {
		if err := runGroup(g); err != nil {
			return fmt.Errorf("%s: %w", g.Name, err)
		}
	}
	rep.DurationS = math.Round(time.Since(t0).Seconds()*10) / 10
	rep.LoadAfter = loadavg()

	rep.AllPass = true
	for _, g := range groups {
		as := summarize(g.Anchor.samples)
		for _, c := range g.Cases {
			cs := summarize(c.samples)
			r := result{Group: g.Name, Benchmark: c.Label, Command: c.Argv, stats: cs,
				Anchor: g.Anchor.Label, AnchorCommand: g.Anchor.Argv, AnchorStats: as}
			if as.MedianMS > 0 {
				r.Ratio = math.Round(cs.MedianMS/as.MedianMS*1000) / 1000
			}
			if c.Target > 0 {
				t := c.Target
				p := r.Ratio <= t
				r.Target, r.Pass = &t, &p
				rep.TargetsTotal++
				if p {
					rep.TargetsMet++
				} else {
					rep.AllPass = false
				}
			}
			rep.Results = append(rep.Results, r)
		}
	}
	printTable(os.Stdout, rep)
	if jsonFile != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonFile, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// runGroup runs the warm-ups, then N rounds; each round runs the anchor and
// every case once, in that order (interleaved, so that a change of the
// machine's load hits all of them alike).
func runGroup(g *group) error {
	all := append([]*command{g.Anchor}, g.Cases...)
	fmt.Fprintf(os.Stderr, "bench: %s: %d warm-up(s) + %d timed run(s) of %d commands, interleaved\n",
		g.Name, g.Warmup, g.N, len(all))
	start := time.Now()
	for w := 0; w < g.Warmup; w++ {
		for _, c := range all {
			if _, err := c.once(); err != nil {
				return err
			}
		}
	}
	for i := 0; i < g.N; i++ {
		for _, c := range all {
			d, err := c.once()
			if err != nil {
				return err
			}
			c.samples = append(c.samples, d)
		}
	}
	fmt.Fprintf(os.Stderr, "bench: %s: done in %.1fs\n", g.Name, time.Since(start).Seconds())
	return nil
}

// once runs the command (timed) and then its -after command (untimed).
func (c *command) once() (time.Duration, error) {
	if interrupted.Load() != 0 {
		return 0, errors.New("interrupted")
	}
	c.runs++
	argv := subst(c.Argv, c.runs)
	var stderr bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = &stderr // stdin and stdout: /dev/null
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		err = fmt.Errorf("%s: %s failed (%v): %s", c.Label, strings.Join(argv, " "), err, tail(stderr.String()))
	}
	if len(c.After) > 0 {
		after := subst(c.After, c.runs)
		var aerr bytes.Buffer
		ac := exec.Command(after[0], after[1:]...)
		ac.Stderr = &aerr
		if e := ac.Run(); e != nil && err == nil {
			err = fmt.Errorf("%s: %s failed (%v): %s", c.Label, strings.Join(after, " "), e, tail(aerr.String()))
		}
	}
	return d, err
}

func subst(argv []string, i int) []string {
	out := make([]string, len(argv))
	for k, a := range argv {
		out[k] = strings.ReplaceAll(a, "{i}", strconv.Itoa(i))
	}
	return out
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	if s == "" {
		s = "(no stderr)"
	}
	return s
}

func summarize(ds []time.Duration) stats {
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = round2(float64(d) / float64(time.Millisecond))
	}
	s := stats{N: len(ms), Samples: ms}
	if len(ms) == 0 {
		return s
	}
	sorted := append([]float64(nil), ms...)
	sort.Float64s(sorted)
	n := len(sorted)
	if n%2 == 1 {
		s.MedianMS = sorted[n/2]
	} else {
		s.MedianMS = round2((sorted[n/2-1] + sorted[n/2]) / 2)
	}
	// p90: nearest rank.
	s.P90MS = sorted[int(math.Ceil(0.9*float64(n)))-1]
	s.MinMS, s.MaxMS = sorted[0], sorted[n-1]
	return s
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

func fmtMS(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.2fs", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	default:
		return fmt.Sprintf("%.1fms", v)
	}
}

func printTable(w io.Writer, rep report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "benchmark\tn\tmedian\tp90\tanchor (median)\tratio\ttarget")
	for _, r := range rep.Results {
		target := "-"
		if r.Target != nil {
			verdict := "MISS"
			if *r.Pass {
				verdict = "PASS"
			}
			target = fmt.Sprintf("<=%.2fx %s", *r.Target, verdict)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s %s\t%.2fx\t%s\n", r.Benchmark, r.N, fmtMS(r.MedianMS), fmtMS(r.P90MS),
			r.Anchor, fmtMS(r.AnchorStats.MedianMS), r.Ratio, target)
	}
	tw.Flush()
	fmt.Fprintln(w)
	seen := map[string]bool{}
	fmt.Fprintln(w, "anchors:")
	for _, r := range rep.Results {
		if seen[r.Group] {
			continue
		}
		seen[r.Group] = true
		fmt.Fprintf(w, "  %-22s n=%d median %s p90 %s: %s\n", r.Anchor, r.AnchorStats.N,
			fmtMS(r.AnchorStats.MedianMS), fmtMS(r.AnchorStats.P90MS), strings.Join(r.AnchorCommand, " "))
	}
	fmt.Fprintf(w, "machine: %d CPUs, load average %s before, %s after; %.0fs of benchmarks\n",
		rep.CPUs, rep.LoadBefore, rep.LoadAfter, rep.DurationS)
	if rep.TargetsTotal > 0 {
		fmt.Fprintf(w, "targets: %d of %d met\n", rep.TargetsMet, rep.TargetsTotal)
	}
}

// loadavg returns the 1, 5 and 15 minute load averages ("" when unknown).
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// splitWords splits a command line the way a POSIX shell splits words:
// blanks separate words; backslash quotes the next character; '...' quotes
// everything up to the next '; "..." quotes all but \" \\ \$ \` (as bash's
// printf %q output needs). Nothing is expanded.
func splitWords(s string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
	)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == '\\':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("trailing backslash in %q", s)
			}
			i++
			cur.WriteByte(s[i])
			inWord = true
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
			inWord = true
		case ch == '$' && i+1 < len(s) && s[i+1] == '\'':
			return nil, fmt.Errorf("$'...' quoting is not supported in %q", s)
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
