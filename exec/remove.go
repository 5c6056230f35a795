package exec

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/exec/helpercall"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// StopCreated removes the container a call created (by its ID: never
// another that took the sandbox's name since), whatever runs in it, keeps
// its data, and waits (bounded) until it is gone. It reports whether there
// was a container. exec --rm uses it.
func (m *Manager) StopCreated(ctx context.Context, t core.Target, id string) (bool, error) {
	err := m.Engine.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
	if err == nil {
		waitGone(ctx, m.Engine, id)
		return true, nil
	}
	if isNotFound(err) || isConflict(err) { // conflict: removal already in progress
		return false, nil
	}
	return false, core.EngineError(err, "cannot remove the container of "+t.String())
}

// RemoveCreated removes what the run that returned res created: its
// container (StopCreated: by ID, never another that has taken the name
// since) and the volumes it created, with their data. A sandbox the run
// joined stays, and so do volumes that existed before it. exec --rm uses
// it, and exec after a run whose image could not run the language. It
// reports whether it removed a container; it tries every volume, and its
// error is the first failure.
func (m *Manager) RemoveCreated(ctx context.Context, t core.Target, res Result) (removed bool, err error) {
	if res.Created {
		_, err = m.StopCreated(ctx, t, res.CreatedID)
		removed = err == nil
	}
	for _, v := range res.FreshVolumes {
		if verr := m.Engine.VolumeRemove(ctx, v, true); verr != nil && err == nil {
			err = core.EngineError(verr, "--rm: cannot remove volume "+v)
		}
	}
	return removed, err
}

// Remove removes the target's containers and data, whatever runs in them
// (RemoveSandbox with Force).
func (m *Manager) Remove(ctx context.Context, t core.Target) (bool, error) {
	return m.RemoveSandbox(ctx, t, true)
}

// StopSandbox removes the containers of a target and keeps the data: for a
// scope without a session, the scope's container and every session's. Unless
// force, it refuses with scope_busy while an exec, copy or shell runs in any
// of them, and removes none. It reports whether there was a container.
func (m *Manager) StopSandbox(ctx context.Context, t core.Target, force bool) (bool, error) {
	return m.stop(ctx, t, force, false)
}

// StopExact is StopSandbox for the target's own container only (a scope
// without a session: not its sessions'). `stop --all` uses it.
func (m *Manager) StopExact(ctx context.Context, t core.Target, force bool) (bool, error) {
	return m.stop(ctx, t, force, true)
}

func (m *Manager) stop(ctx context.Context, t core.Target, force, exact bool) (bool, error) {
	ids, err := m.containersOf(ctx, t, exact)
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
func (m *Manager) RemoveSandbox(ctx context.Context, t core.Target, force bool) (bool, error) {
	ids, err := m.containersOf(ctx, t, false)
	if err != nil {
		return false, err
	}
	if err := m.removeContainers(ctx, t, ids, force); err != nil {
		return false, err
	}
	found := len(ids) > 0
	// The target's own volumes (OwnVolume): a scope's, its long-term volume
	// and every session's workspace; a session's, its workspace. A volume
	// named like one of them without the plugin's labels is not touched.
	vs, err := m.Engine.VolumeList(ctx, volume.ListOptions{Filters: scopeFilter(t, "")})
	if err != nil {
		return found, core.EngineError(err, "cannot list the volumes of "+t.String())
	}
	vs.Volumes = withLabels(vs.Volumes, scopeFilter(t, ""))
	vols := map[string]bool{}
	for _, v := range vs.Volumes {
		vt, _, ok := OwnVolume(v)
		if ok && vt.Scope == t.Scope && (t.Session == "" || vt == t) {
			vols[v.Name] = true
		}
	}
	for _, v := range sortedKeys(vols) {
		err := m.Engine.VolumeRemove(ctx, v, false)
		if err != nil && volumeInUse(err) && m.removeDeadSeeders(ctx, v, force) {
			err = m.Engine.VolumeRemove(ctx, v, false)
		}
		switch {
		case err == nil:
			found = true
		case isNotFound(err):
		case volumeInUse(err):
			// A call re-created the sandbox while this one removed it.
			return found, core.Errorf(core.CodeScopeBusy, "sandbox %s is busy: it was used again while being removed (volume %s is in use); run the rm again once it is idle, or with --force", t, v)
		default:
			return found, core.EngineError(err, "cannot remove volume "+v)
		}
	}
	return found, nil
}

// volumeInUse reports the engine's refusal to remove a volume a container
// mounts.
func volumeInUse(err error) bool {
	return isConflict(err) || strings.Contains(err.Error(), "in use")
}

// removeDeadSeeders removes the seeders (ownSeeder: never started) that
// hold volume v when nothing else does, and reports whether it removed
// any: a call that died between its seeder's create and its removal (a
// SIGKILL) leaves one, which kept `rm` from removing the volume until a
// `prune`. A live call removes its seeder right after its create, so
// without force only a seeder older than maxCreateWait is taken for dead;
// with force any is (force cuts running work short anyway).
func (m *Manager) removeDeadSeeders(ctx context.Context, v string, force bool) bool {
	cs, err := m.Engine.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("volume", v))})
	if err != nil || len(cs) == 0 {
		return false
	}
	for i := range cs {
		if !ownSeeder(&cs[i]) || !force && time.Since(time.Unix(cs[i].Created, 0)) < maxCreateWait {
			return false
		}
	}
	for _, c := range cs {
		if err := m.Engine.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !isNotFound(err) {
			return false
		}
	}
	return true
}

// containersOf lists the IDs of the plugin's own sandbox containers of a
// target (OwnSandbox; a scope: its own and every session's, unless exact).
// A look-alike (a container run from a committed sandbox image, copied
// labels, a sandbox's name without its mounts) is never among them.
func (m *Manager) containersOf(ctx context.Context, t core.Target, exact bool) ([]string, error) {
	cs, err := m.Engine.ContainerList(ctx, container.ListOptions{All: true, Filters: scopeFilter(t, core.KindSandbox)})
	if err != nil {
		return nil, core.EngineError(err, "cannot list the sandboxes of "+t.String())
	}
	var ids []string
	for i := range cs {
		ct, ok := ownSandboxSummary(&cs[i])
		if ok && ct.Scope == t.Scope && (t.Session == "" && !exact || ct.Session == t.Session) {
			ids = append(ids, cs[i].ID)
		}
	}
	return ids, nil
}

// removeContainers removes containers of t. Unless force, it first makes sure
// that nothing runs in them and that nothing can start: see claim.
func (m *Manager) removeContainers(ctx context.Context, t core.Target, ids []string, force bool) error {
	if len(ids) == 0 {
		return nil
	}
	holder := newToken() // this call's drains: undoing them leaves another call's
	if !force {
		var drained []string
		for _, id := range ids {
			d, err := m.claim(ctx, t, id, holder)
			if d {
				drained = append(drained, id)
			}
			if err != nil {
				for _, did := range drained {
					m.undrain(ctx, did, holder)
				}
				return err
			}
		}
	}
	for _, id := range ids {
		err := m.Engine.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
		if err != nil && !isNotFound(err) && !isConflict(err) {
			for _, id := range ids {
				m.undrain(ctx, id, holder) // what stays must run again
			}
			return core.EngineError(err, "cannot remove a container of "+t.String())
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
	claimWait = 10 * time.Second // longest wait for runs that keep starting
	claimPoll = 50 * time.Millisecond
	// execSettle: how long an engine exec that looks running may take to
	// be seen ended. An exec's call returns once its wrapper's status
	// arrived; the engine marks the exec ended a moment later (tens of
	// milliseconds; seconds on a loaded machine), and an `rm` right after
	// an `exec` must not call the sandbox busy for that.
	execSettle = 2 * time.Second
)

// drainBusy is `sandbox-helper drain`'s exit code when a run is registered
// with the sandbox's PID 1 (exec/inside/drain.go).
const drainBusy = 3

// claim makes sure that nothing runs in the container and that nothing can
// start in it, so that removing it cannot cut a running exec short:
//
//  1. any engine exec running (a run, a copy, a shell): scope_busy, nothing
//     changed;
//  2. drain it: PID 1, with which every run registers for its life, marks
//     the sandbox draining for this call (for at most a minute: a call that
//     dies cannot leave it drained); from then on a run refuses to
//     start (the plugin's exec tries again and, once the container is gone,
//     creates a new sandbox). A registered run makes the drain
//     busy: back to 1;
//  3. look again: an engine exec that started meanwhile (a copy or a
//     shell, which do not register) undoes the drain: scope_busy.
//
// It does not pause the container: an exec that starts while the engine
// freezes it can deadlock the engine (the exec waits on the frozen cgroup,
// the unpause on the exec), which TestLifecycleRace hit. It reports whether
// it drained the container (the caller undoes that on failure). A
// container that is gone, not running, or paused by a user needs no claim;
// nor can one whose helper predates drain (an older plugin's sandbox).
func (m *Manager) claim(ctx context.Context, t core.Target, id, holder string) (drained bool, err error) {
	deadline := time.Now().Add(claimWait)
	settled := false
	for {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if time.Now().After(deadline) {
			return false, core.Errorf(core.CodeScopeBusy, "sandbox %s is busy: programs keep starting in it; try again, or use --force", t)
		}
		c, err := m.Engine.ContainerInspect(ctx, id)
		if isNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, core.EngineError(err, "cannot inspect a container of "+t.String())
		}
		if c.State == nil || !c.State.Running || c.State.Paused {
			return false, nil // created, exited, dead or paused: nothing runs
		}
		execs, busy := m.workExecs(ctx, id, c.ExecIDs, !settled)
		settled = true
		if busy {
			return false, busyError(t, execs)
		}
		hadChannel := anyRunning(execs)
		code, drainID, err := m.drain(ctx, id, holder, false)
		if err != nil {
			return false, err
		}
		switch code {
		case 0:
		case drainBusy: // a run started since the inspect
			if hadChannel {
				// A call through the exec channel runs: as busy as
				// the exec it replaces.
				return false, busyError(t, execs)
			}
			sleepCtx(ctx, claimPoll)
			continue
		default: // gone meanwhile (-1), or a helper without drain
			return false, nil
		}
		c, err = m.Engine.ContainerInspect(ctx, id)
		if isNotFound(err) {
			return true, nil
		}
		if err != nil {
			m.undrain(ctx, id, holder)
			return false, core.EngineError(err, "cannot inspect a container of "+t.String())
		}
		var others []string
		for _, x := range c.ExecIDs {
			if x != drainID {
				others = append(others, x)
			}
		}
		// The drain killed the exec channels: their execs end. A channel
		// started since (a call that has just returned starts one as it
		// goes) is no work either: in a drained sandbox it serves no run.
		if execs, busy := m.workExecs(ctx, id, others, true); busy {
			m.undrain(ctx, id, holder)
			return false, busyError(t, execs)
		}
		return true, nil
	}
}

// workExecs reports whether engine execs of ids run that are work: more
// than the container's exec channels (channelCount), whose execs are not
// (their calls are runs, which the drain sees). With wait it first waits
// up to execSettle for the others to end, and counts the channels again
// after that wait: a channel whose exec had started but whose process the
// helper had not seen yet at the first count.
func (m *Manager) workExecs(ctx context.Context, id string, ids []string, wait bool) (execs []ExecInfo, busy bool) {
	execs = m.execInfos(ctx, ids)
	if !anyRunning(execs) {
		return execs, false
	}
	channels := m.channelCount(ctx, id)
	if runningCount(execs) > channels && wait {
		execs = m.settle(ctx, ids, execSettle, channels)
		if runningCount(execs) > channels {
			channels = m.channelCount(ctx, id)
		}
	}
	return execs, runningCount(execs) > channels
}

// channelCount is the number of exec channels in the container: their
// execs are not work (their calls are runs, which the drain sees, and the
// drain ends them). The engine does not tell an exec's command, so the
// sandbox's helper counts its channel exec roots (processes whose parent is
// outside the container, which sandboxed code cannot be).
func (m *Manager) channelCount(ctx context.Context, id string) int {
	hs, err := m.helperStatus(ctx, id)
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range hs.Processes {
		if p.Kind == "channel" {
			n++
		}
	}
	return n
}

// settle polls the execs until at most allow run or wait passed, and
// returns what it saw last (see execSettle).
func (m *Manager) settle(ctx context.Context, ids []string, wait time.Duration, allow int) []ExecInfo {
	deadline := time.Now().Add(wait)
	for {
		execs := m.execInfos(ctx, ids)
		if runningCount(execs) <= allow || time.Now().After(deadline) || ctx.Err() != nil {
			return execs
		}
		sleepCtx(ctx, claimPoll)
	}
}

// drain runs `sandbox-helper drain` in the container and returns its exit
// code (-1: the container is not there to exec into) and the exec's ID.
func (m *Manager) drain(ctx context.Context, id, holder string, undo bool) (int, string, error) {
	cmd := append([]string{core.HelperPath}, wire.DrainArgs{Holder: holder, Undo: undo}.Argv()...)
	r, err := helpercall.Do(ctx, m.Engine, helpercall.Call{Container: id,
		Exec: container.ExecOptions{User: core.SandboxUser, AttachStdout: true, AttachStderr: true, Cmd: cmd},
		Raw:  true, MaxRead: 64 << 10, Inspect: true,
	})
	step, err := helpercall.Split(err)
	switch {
	case step == helpercall.Create && (IsGoneError(err) || isConflict(err)),
		step == helpercall.Attach && (execNotStarted(err) || IsGoneError(err)),
		step == helpercall.Inspect && isNotFound(err):
		return -1, r.ExecID, nil
	case err != nil:
		return 0, r.ExecID, core.EngineError(err, "cannot check that the sandbox is idle")
	case r.Running:
		return -1, r.ExecID, nil // cannot happen once the stream ended
	}
	return r.ExitCode, r.ExecID, nil
}

// undrain lifts a drain (the container stays after all).
func (m *Manager) undrain(ctx context.Context, id, holder string) {
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, _, _ = m.drain(bg, id, holder, true)
}

func busyError(t core.Target, execs []ExecInfo) *core.Error {
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
	return core.Errorf(core.CodeScopeBusy, "sandbox %s is busy: %s running in it (an exec, a copy or a shell); wait for it to finish, or use --force to kill the running work first", t, what)
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
