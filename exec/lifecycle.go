package exec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// The lifecycle of a sandbox (ls, inspect, stop, rm, prune, shell, the limit
// of live sandboxes).
//
// How the plugin knows what a sandbox is doing, without a daemon of its own
// and without running anything in the sandbox for `ls`:
//   - busy: the engine lists the execs of a container that have not exited
//     (ContainerInspect's ExecIDs); every exec, copy and shell of the plugin
//     is an exec, and the helper kills whatever a program leaves behind, so
//     a running exec is exactly "something runs in it";
//   - last used: the engine keeps no time of an exec's end, and the helper's
//     PID 1 (which knows it) cannot publish it without a process. `ls` takes
//     the newest exec_die event of the container that the engine's event
//     buffer still holds (its last 256 events), else the container's start;
//     `inspect` also asks the helper (`sandbox-helper status`); `prune` reads
//     the newest modification time in the volumes of sandboxes whose
//     container is gone. Each is a lower bound: the sandbox was used at
//     least that recently.

// States of a sandbox in `ls` and `inspect`.
const (
	StateRunning  = "running"           // an exec, copy or shell runs in it
	StateIdle     = "idle"              // its container is up, nothing runs
	StateExpired  = "expired-with-data" // no container; its volumes stay
	StateStarting = "starting"          // its container is created, not started yet
	StatePaused   = "paused"            // `docker pause` by a user
	StateStopping = "stopping"          // its container exited and is being removed
)

// States lists every state, for --filter state=.
var States = []string{StateRunning, StateIdle, StateExpired, StateStarting, StatePaused, StateStopping}

// Sandbox is one row of `ls` (a target with a container, or data only).
type Sandbox struct {
	Scope     string `json:"scope"`
	Session   string `json:"session"`
	State     string `json:"state"`
	Container string `json:"container"` // 12-character ID; "" without a container
	Image     string `json:"image"`
	Network   string `json:"network"`
	Runtime   string `json:"runtime"`
	// Created is the container's creation, or the oldest volume's when the
	// container is gone.
	Created time.Time `json:"created"`
	// LastUsed is the latest evidence of use (a lower bound); now while
	// something runs; null when unknown (no container).
	LastUsed *time.Time `json:"last_used"`
	IdleTTL  string     `json:"idle_ttl"` // "" without a container
	// Channel: the sandbox has a persistent exec channel open (config
	// exec_channel); warm calls go through it.
	Channel bool     `json:"channel"`
	Volumes []string `json:"volumes"` // the target's own volumes
	// Size is the bytes in Volumes' regular files, with --size; null
	// otherwise, or when they could not all be read.
	Size *int64 `json:"size"`

	ctr     *container.Summary
	inspect *container.InspectResponse
	execs   []ExecInfo
	vols    []*volume.Volume
}

// Target returns the sandbox's target.
func (s *Sandbox) Target() core.Target { return core.Target{Scope: s.Scope, Session: s.Session} }

// ExecInfo is an exec of a sandbox's container that has not exited.
type ExecInfo struct {
	ID      string `json:"id"`
	Running bool   `json:"running"` // false: created, not started yet
	PID     int    `json:"pid"`     // on the engine's host; 0 before it starts
}

// Filter selects sandboxes (--filter KEY=VALUE, docker's semantics: values of
// one key are alternatives, different keys must all match).
type Filter struct {
	Scopes   []string
	Sessions []string // "" matches sandboxes without a session
	States   []string
	Labels   []string // KEY or KEY=VALUE, passed to the engine
}

// ParseFilters parses --filter values: scope=NAME, session=NAME (empty: no
// session), state=STATE, label=KEY[=VALUE].
func ParseFilters(args []string) (Filter, error) {
	var f Filter
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return f, core.Errorf(core.CodeBadFlag, "invalid --filter %q: want KEY=VALUE with KEY scope, session, state or label", a)
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "scope":
			if err := core.ValidateName("scope", v); err != nil {
				return f, core.Errorf(core.CodeBadFlag, "invalid --filter %q: %v", a, err)
			}
			f.Scopes = append(f.Scopes, v)
		case "session":
			if v != "" {
				if err := core.ValidateName("session", v); err != nil {
					return f, core.Errorf(core.CodeBadFlag, "invalid --filter %q: %v", a, err)
				}
			}
			f.Sessions = append(f.Sessions, v)
		case "state":
			if !contains(States, v) {
				return f, core.Errorf(core.CodeBadFlag, "invalid --filter %q: state is one of %s", a, strings.Join(States, ", "))
			}
			f.States = append(f.States, v)
		case "label":
			if v == "" {
				return f, core.Errorf(core.CodeBadFlag, "invalid --filter %q: want label=KEY or label=KEY=VALUE", a)
			}
			f.Labels = append(f.Labels, v)
		default:
			return f, core.Errorf(core.CodeBadFlag, "invalid --filter %q: unknown key %q (want scope, session, state or label)", a, k)
		}
	}
	return f, nil
}

// Match reports whether s passes the scope, session and state filters (the
// engine applies the label filters).
func (f Filter) Match(s *Sandbox) bool {
	if len(f.Scopes) > 0 && !contains(f.Scopes, s.Scope) {
		return false
	}
	if len(f.Sessions) > 0 && !contains(f.Sessions, s.Session) {
		return false
	}
	if len(f.States) > 0 && !contains(f.States, s.State) {
		return false
	}
	return true
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// managedFilter selects the plugin's objects of a kind ("" = any), with the
// extra label filters.
func managedFilter(kind string, labels []string) filters.Args {
	f := filters.NewArgs(filters.Arg("label", core.LabelManaged+"=true"))
	if kind != "" {
		f.Add("label", core.LabelKind+"="+kind)
	}
	for _, l := range labels {
		f.Add("label", l)
	}
	return f
}

// ListOptions tells List what to gather.
type ListOptions struct {
	All    bool // include sandboxes whose container is gone (expired-with-data)
	Filter Filter
	Size   bool // measure the volumes' sizes (a probe container: slower)
	Now    time.Time
}

// parallelism bounds the concurrent per-sandbox calls.
const parallelism = 8

// List returns the sandboxes, sorted by scope then session: one engine call
// for the containers, one for the volumes, one inspect per running container
// (for its execs), one event query for the idle ones, and with Size a probe
// container that reads the volumes. Nothing runs in any sandbox.
func (m *Manager) List(ctx context.Context, o ListOptions) ([]*Sandbox, error) {
	e := m.Engine
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	cf := managedFilter(core.KindSandbox, o.Filter.Labels)
	vf := managedFilter("", o.Filter.Labels)
	if len(o.Filter.Scopes) == 1 {
		cf.Add("label", core.LabelScope+"="+o.Filter.Scopes[0])
		vf.Add("label", core.LabelScope+"="+o.Filter.Scopes[0])
	}
	var (
		cs   []container.Summary
		vs   volume.ListResponse
		cErr error
		vErr error
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		vs, vErr = e.VolumeList(ctx, volume.ListOptions{Filters: vf})
	}()
	cs, cErr = e.ContainerList(ctx, container.ListOptions{All: true, Filters: cf})
	wg.Wait()
	if cErr != nil {
		return nil, core.EngineError(cErr, "cannot list the sandbox containers")
	}
	if vErr != nil {
		return nil, core.EngineError(vErr, "cannot list the sandbox volumes")
	}
	vs.Volumes = withLabels(vs.Volumes, vf)
	rows := assemble(cs, vs.Volumes)
	var out []*Sandbox
	for _, s := range rows {
		if s.ctr == nil && !o.All {
			continue
		}
		// Scope and session filters before the per-container calls.
		if !(Filter{Scopes: o.Filter.Scopes, Sessions: o.Filter.Sessions}).Match(s) {
			continue
		}
		out = append(out, s)
	}
	m.refine(ctx, e, out, o.Now)
	if o.Size {
		if err := m.sizes(ctx, e, out); err != nil {
			return nil, err
		}
	}
	var kept []*Sandbox
	for _, s := range out {
		if o.Filter.Match(s) {
			kept = append(kept, s)
		}
	}
	return kept, nil
}

// assemble groups containers and volumes into sandboxes. Only the plugin's
// own sandbox containers and volumes count (OwnSandbox, OwnVolume): a
// look-alike (copied labels, a sandbox's name without its mounts, labels
// that name another target) is left out.
func assemble(cs []container.Summary, vols []*volume.Volume) []*Sandbox {
	rows := map[core.Target]*Sandbox{}
	get := func(t core.Target) *Sandbox {
		s := rows[t]
		if s == nil {
			s = &Sandbox{Scope: t.Scope, Session: t.Session, Volumes: []string{}}
			rows[t] = s
		}
		return s
	}
	for i := range cs {
		c := &cs[i]
		t, ok := ownSandboxSummary(c)
		if !ok {
			continue
		}
		s := get(t)
		if s.ctr != nil && !preferContainer(c, s.ctr) {
			continue
		}
		s.ctr = c
		s.Container = shortID(c.ID)
		s.Image = c.Labels[core.LabelImage]
		if s.Image == "" {
			s.Image = c.Image
		}
		s.Network = c.Labels[core.LabelNetwork]
		s.Runtime = c.Labels[core.LabelRuntime]
		s.IdleTTL = c.Labels[core.LabelIdleTTL]
		s.Created = time.Unix(c.Created, 0).UTC()
		s.State = containerState(c.State)
	}
	for _, v := range vols {
		t, _, ok := OwnVolume(v)
		if !ok {
			continue
		}
		s := get(t)
		s.vols = append(s.vols, v)
		s.Volumes = append(s.Volumes, v.Name)
	}
	var out []*Sandbox
	for _, s := range rows {
		if s.ctr == nil {
			s.State = StateExpired
			for _, v := range s.vols {
				if ct, err := time.Parse(time.RFC3339, v.CreatedAt); err == nil && (s.Created.IsZero() || ct.Before(s.Created)) {
					s.Created = ct.UTC()
				}
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Scope != out[j].Scope {
			return out[i].Scope < out[j].Scope
		}
		return out[i].Session < out[j].Session
	})
	return out
}

// preferContainer: with two containers for one target (the old one being
// removed while a new one starts), show the live one.
func preferContainer(c, have *container.Summary) bool {
	return c.State == "running" && have.State != "running"
}

func containerState(engineState string) string {
	switch engineState {
	case "running":
		return StateIdle // until its execs are known
	case "created":
		return StateStarting
	case "paused":
		return StatePaused
	default: // exited, dead, removing, restarting
		return StateStopping
	}
}

// refine inspects the running containers (their execs: running or idle) and
// finds the last use of the idle ones.
func (m *Manager) refine(ctx context.Context, e Engine, rows []*Sandbox, now time.Time) {
	var live []*Sandbox
	for _, s := range rows {
		if s.ctr != nil && (s.ctr.State == "running" || s.ctr.State == "paused") {
			live = append(live, s)
		}
	}
	forEach(len(live), func(i int) {
		s := live[i]
		c, err := e.ContainerInspect(ctx, s.ctr.ID)
		if err != nil {
			if isNotFound(err) {
				s.State = StateStopping
			}
			return
		}
		s.inspect = &c
		s.execs = m.execInfos(ctx, c.ExecIDs)
		running := runningCount(s.execs)
		if name := s.Target().ContainerName(); m.Channel != nil && m.Channel.Has(name) {
			// This user's exec channel: one running exec, which is
			// work only while a call runs through it (another
			// user's channel shows as running).
			s.Channel = true
			if !m.Channel.Busy(name) {
				running--
			}
		}
		if c.State != nil && c.State.Paused {
			s.State = StatePaused
		} else if running > 0 {
			s.State = StateRunning
		}
	})
	var idle []*Sandbox
	for _, s := range rows {
		switch s.State {
		case StateRunning:
			t := now.UTC()
			s.LastUsed = &t
		case StateIdle, StatePaused:
			if s.inspect != nil && s.inspect.State != nil {
				if st, err := time.Parse(time.RFC3339Nano, s.inspect.State.StartedAt); err == nil {
					st = st.UTC()
					s.LastUsed = &st
				}
			}
			idle = append(idle, s)
		}
	}
	if len(idle) > 0 {
		lastExecEnds(ctx, e, idle, now)
	}
}

// lastExecEnds moves each idle sandbox's LastUsed to the newest exec_die event
// of its container that the engine still remembers.
func lastExecEnds(ctx context.Context, e Engine, rows []*Sandbox, now time.Time) {
	since := now
	byID := map[string]*Sandbox{}
	for _, s := range rows {
		byID[s.ctr.ID] = s
		if s.LastUsed != nil && s.LastUsed.Before(since) {
			since = *s.LastUsed
		}
	}
	f := filters.NewArgs(filters.Arg("type", "container"), filters.Arg("event", "exec_die"),
		filters.Arg("label", core.LabelManaged+"=true"), filters.Arg("label", core.LabelKind+"="+core.KindSandbox))
	// The engine replays its buffer up to Until and closes the stream; the
	// deadline guards against an engine whose clock is behind ours.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	msgs, errs := e.Events(ctx, events.ListOptions{
		Since:   fmt.Sprintf("%d", since.Add(-time.Second).Unix()),
		Until:   fmt.Sprintf("%d", now.Unix()),
		Filters: f,
	})
	for {
		select {
		case msg, ok := <-msgs:
			if !ok {
				return
			}
			s := byID[msg.Actor.ID]
			if s == nil {
				continue
			}
			t := time.Unix(0, msg.TimeNano).UTC()
			if msg.TimeNano == 0 {
				t = time.Unix(msg.Time, 0).UTC()
			}
			if s.LastUsed == nil || t.After(*s.LastUsed) {
				s.LastUsed = &t
			}
		case <-errs:
			return
		case <-ctx.Done():
			return
		}
	}
}

// execInfos inspects the execs the engine lists for a container (those that
// have not exited).
func (m *Manager) execInfos(ctx context.Context, ids []string) []ExecInfo {
	var out []ExecInfo
	for _, id := range ids {
		ei, err := m.Engine.ContainerExecInspect(ctx, id)
		if err != nil {
			continue // exited and collected meanwhile
		}
		out = append(out, ExecInfo{ID: shortID(id), Running: ei.Running, PID: ei.Pid})
	}
	return out
}

func anyRunning(es []ExecInfo) bool { return runningCount(es) > 0 }

func runningCount(es []ExecInfo) int {
	n := 0
	for _, e := range es {
		if e.Running {
			n++
		}
	}
	return n
}

// sizes fills Size: the bytes of the rows' volumes, measured by the
// read-only probe container (see probeNewest). The engine's own report
// (docker system df) computes every image and layer on API 1.41, which takes
// tens of seconds on a busy engine, and refuses concurrent callers. A size
// stays null when the walk was incomplete or failed.
func (m *Manager) sizes(ctx context.Context, e Engine, rows []*Sandbox) error {
	var vols []string
	for _, s := range rows {
		vols = append(vols, s.Volumes...)
	}
	if len(vols) == 0 {
		return nil
	}
	info, err := m.probeNewest(ctx, e, vols)
	if err != nil {
		return err
	}
	for _, s := range rows {
		var total int64
		known := len(s.Volumes) > 0
		for _, v := range s.Volumes {
			n, ok := info[v]
			if !ok || !n.Complete {
				known = false
				break
			}
			total += n.Bytes
		}
		if known {
			s.Size = &total
		}
	}
	return nil
}

// forEach runs f(0..n-1), parallelism at a time.
func forEach(n int, f func(i int)) {
	sem := make(chan struct{}, parallelism)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}(i)
	}
	wg.Wait()
}

// Find returns the sandbox of a target (with or without a container), or a
// not_found error.
func (m *Manager) Find(ctx context.Context, t core.Target, size bool) (*Sandbox, error) {
	f := Filter{Scopes: []string{t.Scope}, Sessions: []string{t.Session}}
	rows, err := m.List(ctx, ListOptions{All: true, Filter: f, Size: size})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, core.Errorf(core.CodeNotFound, "no sandbox %s (neither a container nor data): see `docker sandbox ls -a`", t)
	}
	return rows[0], nil
}

// testRunScope is the test-run label value set by DOCKER_SANDBOX_TEST_RUN, or "".
func testRunScope() string { return os.Getenv("DOCKER_SANDBOX_TEST_RUN") }

var errBusy = errors.New("busy")

// RemoveScopeNetwork removes the scope's egress network when no sandbox
// uses it (Network.Release): `rm SCOPE` calls it whether or not the scope
// still had a container or data. It reports whether it removed one.
func (m *Manager) RemoveScopeNetwork(ctx context.Context, scope string) (bool, error) {
	if m.Network == nil {
		return false, nil
	}
	return m.Network.Release(ctx, scope)
}

// ScopeNetworkScopes lists the scopes that have an egress network of the
// plugin's own (Network.Scopes), with extra label filters: `rm --all` also
// removes those of scopes that have nothing else left.
func (m *Manager) ScopeNetworkScopes(ctx context.Context, labels []string) ([]string, error) {
	if m.Network == nil {
		return nil, nil
	}
	return m.Network.Scopes(ctx, labels)
}
