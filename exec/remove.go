package exec

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/volume"
)

// Stop removes the target's own container (one, by name, whatever runs in it)
// and keeps its data. It reports whether there was a container. exec --rm
// uses it for the container it created.
func (m *Manager) Stop(ctx context.Context, t Target) (bool, error) {
	err := m.Engine.ContainerRemove(ctx, t.ContainerName(), container.RemoveOptions{Force: true})
	if err == nil {
		return true, nil
	}
	if isNotFound(err) || isConflict(err) { // conflict: removal already in progress
		return false, nil
	}
	return false, EngineError(err, "cannot remove the container of "+t.String())
}

// Remove removes the target's containers and data, whatever runs in them
// (RemoveSandbox with Force).
func (m *Manager) Remove(ctx context.Context, t Target) (bool, error) {
	return m.RemoveSandbox(ctx, t, true)
}

// StopSandbox removes the containers of a target and keeps the data: for a
// scope without a session, the scope's container and every session's. Unless
// force, it refuses with scope_busy while an exec, copy or shell runs in any
// of them, and removes none. It reports whether there was a container.
func (m *Manager) StopSandbox(ctx context.Context, t Target, force bool) (bool, error) {
	ids, err := m.containersOf(ctx, t, false)
	if err != nil {
		return false, err
	}
	if len(ids) == 0 {
		return false, nil
	}
	if err := m.removeContainers(ctx, t, ids, force); err != nil {
		return false, err
	}
	return true, nil
}

// StopExact is StopSandbox for the target's own container only (a scope
// without a session: not its sessions'). `stop --all` uses it.
func (m *Manager) StopExact(ctx context.Context, t Target, force bool) (bool, error) {
	ids, err := m.containersOf(ctx, t, true)
	if err != nil {
		return false, err
	}
	if len(ids) == 0 {
		return false, nil
	}
	if err := m.removeContainers(ctx, t, ids, force); err != nil {
		return false, err
	}
	return true, nil
}

// RemoveSandbox removes the containers and the data of a target: for a scope
// without a session, every session's container and workspace and the scope's
// long-term volume; for a session, its container and workspace. Unless force,
// it refuses with scope_busy while something runs in them. It reports
// whether there was anything to remove.
func (m *Manager) RemoveSandbox(ctx context.Context, t Target, force bool) (bool, error) {
	ids, err := m.containersOf(ctx, t, false)
	if err != nil {
		return false, err
	}
	if err := m.removeContainers(ctx, t, ids, force); err != nil {
		return false, err
	}
	found := len(ids) > 0
	vols := map[string]bool{}
	if t.Session == "" {
		vs, err := m.Engine.VolumeList(ctx, volume.ListOptions{Filters: scopeFilter(t, "")})
		if err != nil {
			return found, EngineError(err, "cannot list the volumes of "+t.String())
		}
		for _, v := range vs.Volumes {
			if k := v.Labels[LabelKind]; k == KindUser || k == KindWorkspace {
				vols[v.Name] = true
			}
		}
	} else {
		vs, err := m.Engine.VolumeList(ctx, volume.ListOptions{Filters: scopeFilter(t, KindWorkspace)})
		if err != nil {
			return found, EngineError(err, "cannot list the volumes of "+t.String())
		}
		for _, v := range vs.Volumes {
			if v.Name == t.WorkspaceVolume() {
				vols[v.Name] = true
			}
		}
	}
	for _, v := range sortedKeys(vols) {
		err := m.Engine.VolumeRemove(ctx, v, false)
		switch {
		case err == nil:
			found = true
		case isNotFound(err):
		case isConflict(err) || strings.Contains(err.Error(), "in use"):
			// A call re-created the sandbox while this one removed it.
			return found, Errorf(CodeScopeBusy, "sandbox %s is busy: it was used again while being removed (volume %s is in use); run the rm again once it is idle, or with --force", t, v)
		default:
			return found, EngineError(err, "cannot remove volume "+v)
		}
	}
	return found, nil
}

// containersOf lists the IDs of the plugin's sandbox containers of a target
// (a scope: its own and every session's, unless exact).
func (m *Manager) containersOf(ctx context.Context, t Target, exact bool) ([]string, error) {
	cs, err := m.Engine.ContainerList(ctx, container.ListOptions{All: true, Filters: scopeFilter(t, KindSandbox)})
	if err != nil {
		return nil, EngineError(err, "cannot list the sandboxes of "+t.String())
	}
	var ids []string
	for _, c := range cs {
		if c.Labels[LabelScope] == t.Scope && (t.Session == "" && !exact || c.Labels[LabelSession] == t.Session) {
			ids = append(ids, c.ID)
		}
	}
	return ids, nil
}

// removeContainers removes containers of t. Unless force, it first makes sure
// that nothing runs in them and that nothing can start: see claim.
func (m *Manager) removeContainers(ctx context.Context, t Target, ids []string, force bool) error {
	if len(ids) == 0 {
		return nil
	}
	if !force {
		e, err := m.lc()
		if err != nil {
			return err
		}
		var paused []string
		for _, id := range ids {
			p, err := m.claim(ctx, e, t, id)
			if p {
				paused = append(paused, id)
			}
			if err != nil {
				bg := context.WithoutCancel(ctx)
				for _, pid := range paused {
					_ = e.ContainerUnpause(bg, pid)
				}
				return err
			}
		}
	}
	for _, id := range ids {
		err := m.Engine.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
		if err != nil && !isNotFound(err) && !isConflict(err) {
			return EngineError(err, "cannot remove a container of "+t.String())
		}
	}
	// The engine removes an auto-remove container asynchronously; wait for
	// each to be gone so that its volumes are free.
	for _, id := range ids {
		waitGone(ctx, m.Engine, id)
	}
	return nil
}

// Claim timings.
const (
	claimWait    = 10 * time.Second        // longest wait for a concurrent stop/rm or a starting exec
	pendingStale = 1500 * time.Millisecond // an exec created this long ago and not started is abandoned
	claimPoll    = 50 * time.Millisecond
)

// claim makes sure that nothing runs in the container and that nothing can
// start in it, so that removing it cannot cut a running exec short:
//
//  1. any exec running: scope_busy, nothing changed;
//  2. an exec created but not started yet (a call between its two requests):
//     wait until it starts (then 1.) or is abandoned (its client died);
//  3. pause the container: the engine then refuses to create or start execs
//     in it (a concurrent exec waits and, once the container is gone,
//     creates a new sandbox); look again, and if an exec got in between,
//     unpause and go back to 1.
//
// It reports whether it left the container paused (the caller unpauses on
// failure). A container that is gone, or not running, needs no claim.
func (m *Manager) claim(ctx context.Context, e lifecycleEngine, t Target, id string) (paused bool, err error) {
	deadline := time.Now().Add(claimWait)
	firstSeen := map[string]time.Time{}
	stale := func(execs []ExecInfo) (pending bool) {
		for _, x := range execs {
			if x.Running {
				continue
			}
			if _, ok := firstSeen[x.ID]; !ok {
				firstSeen[x.ID] = time.Now()
			}
			if time.Since(firstSeen[x.ID]) < pendingStale {
				pending = true
			}
		}
		return pending
	}
	pausedWait := time.Time{}
	for {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if time.Now().After(deadline) {
			return false, Errorf(CodeScopeBusy, "sandbox %s is busy: execs keep starting in it; try again, or use --force", t)
		}
		c, err := m.Engine.ContainerInspect(ctx, id)
		if isNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, EngineError(err, "cannot inspect a container of "+t.String())
		}
		if c.State == nil || !c.State.Running {
			return false, nil // created, exited or dead: nothing runs
		}
		execs := m.execInfos(ctx, c.ExecIDs)
		if anyRunning(execs) {
			return false, busyError(t, execs)
		}
		if c.State.Paused {
			// Another stop or rm holds it (it removes it in a moment), or a
			// user paused it: wait a little, then treat it as claimed.
			if pausedWait.IsZero() {
				pausedWait = time.Now()
			}
			if time.Since(pausedWait) < 3*time.Second {
				sleepCtx(ctx, claimPoll)
				continue
			}
			return false, nil
		}
		if stale(execs) {
			sleepCtx(ctx, claimPoll)
			continue
		}
		if err := e.ContainerPause(ctx, id); err != nil {
			switch {
			case isNotFound(err):
				return false, nil
			case strings.Contains(err.Error(), "already paused"):
				continue
			case strings.Contains(err.Error(), "not running"):
				return false, nil
			default:
				return false, EngineError(err, "cannot pause a container of "+t.String()+" to check it is idle")
			}
		}
		c, err = m.Engine.ContainerInspect(ctx, id)
		if isNotFound(err) {
			return false, nil
		}
		if err != nil {
			_ = e.ContainerUnpause(context.WithoutCancel(ctx), id)
			return false, EngineError(err, "cannot inspect a container of "+t.String())
		}
		execs = m.execInfos(ctx, c.ExecIDs)
		if anyRunning(execs) || stale(execs) {
			// An exec was created just before the pause: let it run.
			_ = e.ContainerUnpause(context.WithoutCancel(ctx), id)
			if anyRunning(execs) {
				return false, busyError(t, execs)
			}
			sleepCtx(ctx, claimPoll)
			continue
		}
		return true, nil
	}
}

func busyError(t Target, execs []ExecInfo) *Error {
	n := 0
	for _, x := range execs {
		if x.Running {
			n++
		}
	}
	what := "1 exec is"
	if n != 1 {
		what = fmt.Sprintf("%d execs are", n)
	}
	return Errorf(CodeScopeBusy, "sandbox %s is busy: %s running in it (an exec, a copy or a shell); wait for it to finish, or use --force to kill the running work first", t, what)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return sortedStrings(out)
}

// WaitGone waits (bounded) until the target's container is gone.
func (m *Manager) WaitGone(ctx context.Context, t Target) { waitGone(ctx, m.Engine, t.ContainerName()) }

func waitGone(ctx context.Context, e Engine, name string) {
	for i := 0; i < 100; i++ {
		if _, err := e.ContainerInspect(ctx, name); isNotFound(err) || ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-timeAfter(50):
		}
	}
}
