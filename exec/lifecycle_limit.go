package exec

import (
	"context"

	"github.com/docker/docker/api/types/container"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// DefaultMaxSandboxes is the limit of live sandboxes per engine when the
// Manager is given none (config max_sandboxes).
const DefaultMaxSandboxes = 50

// checkLimit refuses to create a sandbox when the engine already has
// MaxSandboxes live ones (containers of the plugin's sandboxes that are not
// exiting). It runs before anything is created. Two creations at the same
// moment can both pass at the last free place: the limit is a guard against
// runaway scripts, not a quota.
//
// With DOCKER_SANDBOX_TEST_RUN set (test suites), only the sandboxes of that
// run count, so that suites sharing an engine do not see each other's.
func (m *Manager) checkLimit(ctx context.Context) error {
	max := m.MaxSandboxes
	if max <= 0 {
		max = DefaultMaxSandboxes
	}
	var labels []string
	if id := testRunScope(); id != "" {
		labels = append(labels, core.LabelTestRun+"="+id)
	}
	n, err := m.CountLive(ctx, labels)
	if err != nil {
		return err
	}
	if n >= max {
		return core.Errorf(core.CodeLimitReached, "limit reached: the engine already has %d live sandboxes and max_sandboxes is %d; nothing was created. Stop or remove some (`docker sandbox ls`, `docker sandbox stop SCOPE`, `docker sandbox prune`), or raise max_sandboxes (config, or DOCKER_SANDBOX_MAX_SANDBOXES)", n, max)
	}
	return nil
}

// CountLive counts the plugin's own live sandbox containers (created,
// running or paused: OwnSandbox; a look-alike does not count), with extra
// label filters.
func (m *Manager) CountLive(ctx context.Context, labels []string) (int, error) {
	cs, err := m.Engine.ContainerList(ctx, container.ListOptions{All: true, Filters: managedFilter(core.KindSandbox, labels)})
	if err != nil {
		return 0, core.EngineError(err, "cannot count the live sandboxes")
	}
	n := 0
	for i := range cs {
		c := &cs[i]
		if _, ok := ownSandboxSummary(c); !ok {
			continue
		}
		switch c.State {
		case "created", "running", "paused", "restarting":
			n++
		}
	}
	return n, nil
}
