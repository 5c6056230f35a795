package exec

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// PruneOptions tells Prune what to remove.
type PruneOptions struct {
	// OlderThan, when set (DataAge), also removes the data of sandboxes whose
	// container is gone and whose data was last written longer ago.
	OlderThan time.Duration
	DataAge   bool
	DryRun    bool
	Labels    []string // extra label filters (KEY or KEY=VALUE)
	// Grace spares objects younger than this that may belong to a call in
	// progress (a container being created, a seeder, a network made before
	// its sandbox).
	Grace time.Duration
	// KeepVolumes are never removed (the current plugin's helper volumes).
	KeepVolumes []string
	Now         time.Time
}

// PruneItem is one object Prune removed, would remove, or kept.
type PruneItem struct {
	Type     string     `json:"type"` // container, volume or network
	Name     string     `json:"name"`
	ID       string     `json:"id"`
	Kind     string     `json:"kind"` // its com.docker.sandbox.kind label
	Scope    string     `json:"scope"`
	Session  string     `json:"session"`
	Reason   string     `json:"reason"`
	LastUsed *time.Time `json:"last_used"`
	Removed  bool       `json:"removed"`
	Error    string     `json:"error"`
}

// PruneReport is the result of Prune (`prune --format json`).
type PruneReport struct {
	DryRun  bool        `json:"dry_run"`
	Objects []PruneItem `json:"objects"` // removed, or with --dry-run would be
	Kept    []PruneItem `json:"kept"`    // data Prune looked at and kept, with why
}

// pruneInventory is everything of the plugin's that Prune considers.
type pruneInventory struct {
	containers []container.Summary
	volumes    []*volume.Volume
	networks   []network.Summary
}

// newestInfo is when a volume's data was last written, from the probe.
type newestInfo struct {
	Newest   *time.Time
	Future   int // entries whose time was in the future (left out of Newest)
	Bytes    int64
	Complete bool
	Error    string
}

// Prune removes what the plugin made that nobody needs any more; it never
// touches an object that is not the plugin's own (lifecycle_own.go: name,
// labels, kind and, for sandboxes, mounts; labels alone can be copied):
//   - sandbox containers that are not running (their helper exited but the
//     engine did not remove them, or a creation failed half-way);
//   - seeder and probe containers, which never outlive the call that made
//     them;
//   - the egress sidecar when no sandbox uses the proxy (Network.PrunePlan);
//   - scope networks of a scope without a sandbox container;
//   - helper volumes of other plugin versions that no container uses;
//   - with DataAge, the volumes of sandboxes whose container is gone and whose
//     newest file is older than OlderThan. A scope's long-term volume goes
//     only when none of its sessions has a container and all its data is
//     that old. Data whose age cannot be told is kept.
//
// Everything younger than Grace is spared.
func (m *Manager) Prune(ctx context.Context, o PruneOptions) (PruneReport, error) {
	rep := PruneReport{DryRun: o.DryRun, Objects: []PruneItem{}, Kept: []PruneItem{}}
	e := m.Engine
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	inv, err := m.pruneInventory(ctx, e, o.Labels)
	if err != nil {
		return rep, err
	}
	ctrs, survivors, proxyUsed := planContainers(inv.containers, o.Now, o.Grace)
	if m.Network != nil {
		// The sidecar, decided last: when no sandbox uses the proxy.
		rm, keep := m.Network.PrunePlan(inv.containers, proxyUsed, o.Now, o.Grace)
		ctrs, survivors = append(ctrs, rm...), append(survivors, keep...)
	}
	var newest map[string]newestInfo
	cands := dataCandidates(inv.volumes, survivors)
	if o.DataAge && len(cands) > 0 {
		names := make([]string, 0, len(cands))
		for _, v := range cands {
			names = append(names, v.Name)
		}
		newest, err = m.probeNewest(ctx, e, names)
		if err != nil {
			return rep, err
		}
	}
	var data, kept []PruneItem
	if o.DataAge {
		data, kept = planData(cands, newest, o.Now, o.OlderThan)
	}
	helpers := planHelpers(inv.volumes, inv.containers, o.KeepVolumes)
	nets := planNetworks(inv.networks, survivors, o.Now, o.Grace)
	rep.Kept = append(rep.Kept, kept...)
	all := append(append(append(ctrs, data...), helpers...), nets...)
	if o.DryRun {
		rep.Objects = append(rep.Objects, all...)
		return rep, nil
	}
	bg := context.WithoutCancel(ctx)
	for i := range all {
		it := &all[i]
		if it.Type != "container" {
			continue
		}
		err := e.ContainerRemove(bg, it.ID, container.RemoveOptions{Force: true})
		it.Removed = err == nil || isNotFound(err) || isConflict(err)
		if !it.Removed {
			it.Error = err.Error()
		}
	}
	for i := range all {
		if all[i].Type == "container" {
			waitGone(bg, e, all[i].ID)
		}
	}
	for i := range all {
		it := &all[i]
		switch it.Type {
		case "volume":
			err := e.VolumeRemove(bg, it.Name, false)
			it.Removed = err == nil || isNotFound(err)
			if !it.Removed {
				it.Error = err.Error()
			}
		case "network":
			for _, c := range attachedTo(it.ID, it.Name, survivors) {
				_ = e.NetworkDisconnect(bg, it.ID, c, true)
			}
			err := e.NetworkRemove(bg, it.ID)
			it.Removed = err == nil || isNotFound(err)
			if !it.Removed {
				it.Error = err.Error()
			}
		}
	}
	rep.Objects = append(rep.Objects, all...)
	return rep, nil
}

func (m *Manager) pruneInventory(ctx context.Context, e Engine, labels []string) (pruneInventory, error) {
	var inv pruneInventory
	var err error
	f := managedFilter("", labels)
	if inv.containers, err = e.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err != nil {
		return inv, core.EngineError(err, "cannot list the plugin's containers")
	}
	vs, err := e.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return inv, core.EngineError(err, "cannot list the plugin's volumes")
	}
	vs.Volumes = withLabels(vs.Volumes, f)
	inv.volumes = vs.Volumes
	if inv.networks, err = e.NetworkList(ctx, network.ListOptions{Filters: f}); err != nil {
		return inv, core.EngineError(err, "cannot list the plugin's networks")
	}
	return inv, nil
}

func older(created, now time.Time, grace time.Duration) bool {
	return !created.IsZero() && now.Sub(created) >= grace
}

// ContainerItem is the PruneItem of a container, with why it goes.
func ContainerItem(c container.Summary, reason string) PruneItem {
	name := c.ID
	if len(c.Names) > 0 {
		name = strings.TrimPrefix(c.Names[0], "/")
	}
	return PruneItem{Type: "container", Name: name, ID: c.ID, Kind: c.Labels[core.LabelKind],
		Scope: c.Labels[core.LabelScope], Session: c.Labels[core.LabelSession], Reason: reason}
}

// planContainers decides which containers go, and returns the others, and
// whether a surviving sandbox uses the proxy. It considers only the
// plugin's own containers (OwnSandbox, ownSeeder, ownProbe): a look-alike is
// neither removed nor a survivor; the egress sidecar is decided by
// Network.PrunePlan.
func planContainers(cs []container.Summary, now time.Time, grace time.Duration) (remove []PruneItem, survivors []container.Summary, proxyUsed bool) {
	for i := range cs {
		c := cs[i]
		created := time.Unix(c.Created, 0)
		switch {
		case managedAs(c.Labels, core.KindSandbox):
			if _, ok := ownSandboxSummary(&c); !ok {
				continue // not ours
			}
			switch {
			case c.State == "exited" || c.State == "dead":
				remove = append(remove, ContainerItem(c, "expired: its helper exited and the container was not removed"))
				continue
			case c.State == "created" && older(created, now, grace):
				remove = append(remove, ContainerItem(c, "expired: created but never started"))
				continue
			}
			if c.Labels[core.LabelNetwork] == "proxy" {
				proxyUsed = true
			}
		case ownSeeder(&c) || ownProbe(&c):
			if older(created, now, grace) {
				remove = append(remove, ContainerItem(c, "orphan: a "+c.Labels[core.LabelKind]+" container left by an interrupted call"))
				continue
			}
		default:
			continue // not ours, or the egress side's
		}
		survivors = append(survivors, c)
	}
	return remove, survivors, proxyUsed
}

// dataCandidates are the plugin's own sandbox volumes (OwnVolume) whose
// target has no surviving container (a scope's long-term volume: no
// container of the scope at all).
func dataCandidates(vols []*volume.Volume, survivors []container.Summary) []*volume.Volume {
	scopes := map[string]bool{}
	targets := map[core.Target]bool{}
	for i := range survivors {
		if t, ok := ownSandboxSummary(&survivors[i]); ok {
			scopes[t.Scope] = true
			targets[t] = true
		}
	}
	var out []*volume.Volume
	for _, v := range vols {
		t, kind, ok := OwnVolume(v)
		switch {
		case !ok:
		case kind == core.KindUser && !scopes[t.Scope]:
			out = append(out, v)
		case kind == core.KindWorkspace && !targets[t]:
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func volItem(v *volume.Volume, reason string) PruneItem {
	return PruneItem{Type: "volume", Name: v.Name, ID: v.Name, Kind: v.Labels[core.LabelKind],
		Scope: v.Labels[core.LabelScope], Session: v.Labels[core.LabelSession], Reason: reason}
}

// planData decides which candidate volumes are old enough to go. A scope's
// long-term volume counts as used when any volume of the scope is.
func planData(cands []*volume.Volume, newest map[string]newestInfo, now time.Time, olderThan time.Duration) (remove, kept []PruneItem) {
	// The last use of each scope: the newest of all its candidate volumes;
	// unknown if any of them is unknown.
	type use struct {
		t       time.Time
		unknown string
		future  int
	}
	scopeUse := map[string]*use{}
	for _, v := range cands {
		s := v.Labels[core.LabelScope]
		u := scopeUse[s]
		if u == nil {
			u = &use{}
			scopeUse[s] = u
		}
		last, future, why := lastWritten(v, newest)
		u.future += future
		switch {
		case why != "":
			u.unknown = why
		case last.After(u.t):
			u.t = last
		}
	}
	for _, v := range cands {
		last, future, why := lastWritten(v, newest)
		if v.Labels[core.LabelKind] == core.KindUser {
			u := scopeUse[v.Labels[core.LabelScope]]
			last, future, why = u.t, u.future, u.unknown
		}
		it := volItem(v, "")
		if why != "" {
			it.Reason = "kept: last use unknown: " + why
			kept = append(kept, it)
			continue
		}
		lu := last.UTC()
		it.LastUsed = &lu
		age := now.Sub(last).Truncate(time.Second)
		note := ""
		if future > 0 {
			note = fmt.Sprintf(" (%d time(s) in the future ignored)", future)
		}
		// --older-than 0s: every unused volume, whatever its age (a
		// write in the last second truncates to 0s, and an engine whose
		// clock runs ahead makes fresh data look younger still).
		if olderThan > 0 && age <= olderThan {
			it.Reason = fmt.Sprintf("kept: last written %s ago, not longer than --older-than %s%s", age, olderThan, note)
			kept = append(kept, it)
			continue
		}
		it.Reason = fmt.Sprintf("unused: last written %s ago, longer than --older-than %s%s", age, olderThan, note)
		remove = append(remove, it)
	}
	return remove, kept
}

// lastWritten is when a volume's data was last written, from the probe's
// answer: the newest time in it that is not in the future (the probe leaves
// those out: sandboxed code can plant them, `touch -d`, to look fresh
// forever). When every time in it was in the future, nothing in the data
// can be believed and the volume's creation (the engine's record) stands
// for its last use. why is set when the age cannot be told.
func lastWritten(v *volume.Volume, newest map[string]newestInfo) (last time.Time, future int, why string) {
	n, ok := newest[v.Name]
	switch {
	case !ok:
		return last, 0, "its data could not be read"
	case !n.Complete:
		why = "its data could not be read completely"
		if n.Error != "" {
			why += " (" + n.Error + ")"
		}
		return last, n.Future, why
	case n.Newest != nil:
		return *n.Newest, n.Future, ""
	case n.Future > 0:
		if ct, err := time.Parse(time.RFC3339, v.CreatedAt); err == nil {
			return ct, n.Future, ""
		}
		return last, n.Future, "every time in its data is in the future and its creation time is unknown"
	default:
		return last, 0, "its data could not be read completely"
	}
}

// planHelpers picks the helper volumes of other plugin versions that no
// container mounts (ownHelperVolume: a volume with copied labels and
// another name is not one).
func planHelpers(vols []*volume.Volume, cs []container.Summary, keep []string) []PruneItem {
	inUse := map[string]bool{}
	for _, c := range cs {
		for _, mp := range c.Mounts {
			inUse[mp.Name] = true
		}
	}
	var out []PruneItem
	for _, v := range vols {
		if !ownHelperVolume(v) || contains(keep, v.Name) || inUse[v.Name] {
			continue
		}
		out = append(out, volItem(v, "orphan: the helper of another plugin version, used by no container"))
	}
	return out
}

// planNetworks picks the scope networks (OwnScopeNetwork) of scopes without
// a sandbox container. The plugin makes no other network; one with copied
// labels and another name is not its own.
func planNetworks(nets []network.Summary, survivors []container.Summary, now time.Time, grace time.Duration) []PruneItem {
	scopes := map[string]bool{}
	for i := range survivors {
		if t, ok := ownSandboxSummary(&survivors[i]); ok {
			scopes[t.Scope] = true
		}
	}
	var out []PruneItem
	for _, n := range nets {
		s, ok := OwnScopeNetwork(n.Name, n.Labels)
		if !ok || !older(n.Created, now, grace) || scopes[s] {
			continue
		}
		out = append(out, PruneItem{Type: "network", Name: n.Name, ID: n.ID, Kind: n.Labels[core.LabelKind], Scope: s,
			Reason: "orphan: no sandbox of scope " + s})
	}
	return out
}

// attachedTo lists the containers among cs attached to a network.
func attachedTo(id, name string, cs []container.Summary) []string {
	var out []string
	for _, c := range cs {
		if c.NetworkSettings == nil {
			continue
		}
		for n, ep := range c.NetworkSettings.Networks {
			if n == name || (ep != nil && ep.NetworkID == id) {
				out = append(out, c.ID)
				break
			}
		}
	}
	return out
}

// probeBatch bounds the volumes one probe container mounts.
const probeBatch = 50

// probeNewest learns when each volume's data was last written, and its size: a short-lived
// container of the helper image (hardened like a sandbox, no network, the
// volumes mounted read-only) runs `sandbox-helper status --newest`.
func (m *Manager) probeNewest(ctx context.Context, e Engine, vols []string) (map[string]newestInfo, error) {
	if m.Images == nil {
		return nil, core.Errorf(core.CodeInternal, "reading the data of sandboxes needs the helper image")
	}
	info, err := e.Info(ctx)
	if err != nil {
		return nil, core.EngineError(err, "cannot read the engine's architecture")
	}
	ref, _, err := m.Images.EnsureHelper(ctx, info.Architecture, !ExecOnlyRuntime(info, ""))
	if err != nil {
		return nil, err
	}
	out := map[string]newestInfo{}
	for start := 0; start < len(vols); start += probeBatch {
		end := min(start+probeBatch, len(vols))
		if err := m.probeOnce(ctx, e, ref, vols[start:end], out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (m *Manager) probeOnce(ctx context.Context, e Engine, ref string, vols []string, out map[string]newestInfo) error {
	status := wire.StatusArgs{Newest: true}
	var mounts []mount.Mount
	dirOf := map[string]string{}
	for _, v := range vols {
		dir := path.Join("/v", v)
		dirOf[dir] = v
		status.Dirs = append(status.Dirs, dir)
		mounts = append(mounts, mount.Mount{Type: mount.TypeVolume, Source: v, Target: dir, ReadOnly: true,
			VolumeOptions: &mount.VolumeOptions{NoCopy: true}})
	}
	pids := int64(32)
	cfg := &container.Config{Image: ref, User: core.SandboxUser, Entrypoint: append([]string{core.HelperPath}, status.Argv()...), Labels: core.BaseLabels(core.KindProbe), WorkingDir: "/"}
	hc := &container.HostConfig{
		NetworkMode: "none", ReadonlyRootfs: true, CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"},
		IpcMode: "private", RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "1"}},
		Resources: container.Resources{Memory: 256 << 20, MemorySwap: 256 << 20, NanoCPUs: 1e9, PidsLimit: &pids},
		Mounts:    mounts,
	}
	// Named in the plugin's own namespace, so that prune tells an orphaned
	// probe from a look-alike (ownProbe).
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	resp, err := e.ContainerCreate(ctx, cfg, hc, nil, nil, probeNameStart+hex.EncodeToString(rnd[:]))
	if err != nil {
		return core.EngineError(err, "cannot create the container that reads when the data was last written")
	}
	defer func() {
		_ = e.ContainerRemove(context.WithoutCancel(ctx), resp.ID, container.RemoveOptions{Force: true})
	}()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	waitC, errC := e.ContainerWait(wctx, resp.ID, container.WaitConditionNextExit)
	if err := e.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return core.EngineError(err, "cannot start the container that reads when the data was last written")
	}
	select {
	case <-waitC:
	case err := <-errC:
		return core.EngineError(err, "waiting for the container that reads when the data was last written")
	}
	rc, err := e.ContainerLogs(ctx, resp.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return core.EngineError(err, "cannot read the answer of the data probe")
	}
	defer rc.Close()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, rc); err != nil {
		return core.EngineError(err, "cannot read the answer of the data probe")
	}
	var rep struct {
		Paths []struct {
			Path     string     `json:"path"`
			Newest   *time.Time `json:"newest"`
			Future   int        `json:"future"`
			Bytes    int64      `json:"bytes"`
			Complete bool       `json:"complete"`
			Error    string     `json:"error"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return core.Errorf(core.CodeInternal, "bad answer from the data probe: %v (%s)", err, strings.TrimSpace(stderr.String()))
	}
	for _, p := range rep.Paths {
		if v, ok := dirOf[p.Path]; ok {
			out[v] = newestInfo{Newest: p.Newest, Future: p.Future, Bytes: p.Bytes, Complete: p.Complete, Error: p.Error}
		}
	}
	return nil
}
