package exec

import (
	"context"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/volume"
)

// Stop removes the target's container and keeps its data. It reports
// whether there was a container.
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

// Remove removes the target's container and data. For a scope (no session)
// that is every session's container and workspace and the scope's long-term
// volume; for a session, its container and workspace.
func (m *Manager) Remove(ctx context.Context, t Target) (bool, error) {
	found := false
	cs, err := m.Engine.ContainerList(ctx, container.ListOptions{All: true, Filters: scopeFilter(t, KindSandbox)})
	if err != nil {
		return false, EngineError(err, "cannot list the sandboxes of "+t.String())
	}
	names := map[string]bool{t.ContainerName(): true}
	for _, c := range cs {
		if t.Session == "" || c.Labels[LabelSession] == t.Session {
			names[c.ID] = true
		}
	}
	for n := range names {
		if err := m.Engine.ContainerRemove(ctx, n, container.RemoveOptions{Force: true}); err == nil {
			found = true
		} else if !isNotFound(err) && !isConflict(err) {
			return found, EngineError(err, "cannot remove a container of "+t.String())
		}
	}
	// The engine removes an auto-remove container asynchronously; wait for
	// each to be gone so its volumes are free.
	for n := range names {
		waitGone(ctx, m.Engine, n)
	}
	vols := map[string]bool{t.WorkspaceVolume(): true}
	if t.Session == "" {
		vs, err := m.Engine.VolumeList(ctx, volume.ListOptions{Filters: scopeFilter(t, "")})
		if err != nil {
			return found, EngineError(err, "cannot list the volumes of "+t.String())
		}
		for _, v := range vs.Volumes {
			vols[v.Name] = true
		}
	}
	for v := range vols {
		if err := m.Engine.VolumeRemove(ctx, v, true); err == nil {
			found = true
		} else if !isNotFound(err) {
			return found, EngineError(err, "cannot remove volume "+v)
		}
	}
	return found, nil
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
