package egress

// The rest of exec's Network (Attach is in sidecar.go): a scope's network
// on rm and after a failed first run, the scopes that have one, and the
// sidecar's part of prune.

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/docker-sandbox/docker-sandbox/core"
	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
)

var _ sbexec.Network = (*Manager)(nil)

// Release removes the scope's network (proxy mode) when it is the plugin's
// own (ownScopeNetwork) and no container but the egress sidecar is on
// it (the sidecar is disconnected first). `rm SCOPE` calls it whether or
// not the scope still had a container or data: a proxy-mode scope whose
// container and volumes are gone still has its network. It reports whether
// it removed one; a network of that name that is not the plugin's own is
// left alone. The scope's credential and policy stay, as data.
func (m *Manager) Release(ctx context.Context, scope string) (bool, error) {
	name := NetworkName(scope)
	n, err := m.Engine.NetworkInspect(ctx, name, network.InspectOptions{})
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, core.EngineError(err, "cannot inspect network "+name)
	}
	if s, ok := ownScopeNetwork(n); !ok || s != scope {
		return false, nil
	}
	var sidecar []string
	for id, ep := range n.Containers {
		if ep.Name != SidecarName {
			return false, core.Errorf(core.CodeScopeBusy, "network %s of scope %s is still used by container %s; run the rm again once it is gone, or remove it", name, scope, ep.Name)
		}
		sidecar = append(sidecar, id)
	}
	for _, id := range sidecar {
		_ = m.Engine.NetworkDisconnect(ctx, n.ID, id, true)
	}
	err = m.Engine.NetworkRemove(ctx, n.ID)
	switch {
	case err == nil:
		return true, nil
	case notFound(err):
		return false, nil
	case conflict(err) || strings.Contains(err.Error(), "active endpoints"):
		return false, core.Errorf(core.CodeScopeBusy, "network %s of scope %s is in use again (a call re-created the sandbox meanwhile); run the rm again once it is idle", name, scope)
	default:
		return false, core.EngineError(err, "cannot remove network "+name)
	}
}

// Scopes lists the scopes that have a network of the plugin's own
// (ownScopeNetwork), with extra label filters: `rm --all` also removes
// those of scopes that have nothing else left.
func (m *Manager) Scopes(ctx context.Context, labels []string) ([]string, error) {
	f := filters.NewArgs(filters.Arg("label", core.LabelManaged+"=true"), filters.Arg("label", core.LabelKind+"="+KindNetwork))
	for _, l := range labels {
		f.Add("label", l)
	}
	nets, err := m.Engine.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return nil, core.EngineError(err, "cannot list the scope networks")
	}
	var out []string
	for _, n := range nets {
		if s, ok := ownScopeNetwork(n); ok {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out, nil
}

// ownScopeNetwork reports the scope whose network n is: by its name and
// labels (exec.OwnScopeNetwork, as prune sees it) and as the plugin makes it
// (internal, a subnet of the pool's layout: scopeNetwork).
func ownScopeNetwork(n network.Inspect) (string, bool) {
	s, ok := sbexec.OwnScopeNetwork(n.Name, n.Labels)
	if s2, _, ok2 := scopeNetwork(n); !ok || !ok2 || s2 != s {
		return "", false
	}
	return s, true
}

// PrunePlan decides about the sidecar among the plugin's containers cs
// (its fixed name and kind; a container with its labels under another name
// is not it): it goes when no sandbox uses the proxy and it is older than
// grace; otherwise it stays.
func (m *Manager) PrunePlan(cs []container.Summary, proxyUsed bool, now time.Time, grace time.Duration) (remove []sbexec.PruneItem, survivors []container.Summary) {
	for _, c := range cs {
		if !sidecarSummary(c) {
			continue
		}
		created := time.Unix(c.Created, 0)
		if !proxyUsed && now.Sub(created) >= grace {
			remove = append(remove, sbexec.ContainerItem(c, "orphan: no sandbox uses it"))
			continue
		}
		survivors = append(survivors, c)
	}
	return remove, survivors
}

// sidecarSummary is isSidecar for a listed container.
func sidecarSummary(c container.Summary) bool {
	name := "" // the first name that is not a link's
	for _, n := range c.Names {
		if n = strings.TrimPrefix(n, "/"); n != "" && !strings.Contains(n, "/") {
			name = n
			break
		}
	}
	return name == SidecarName && c.Labels[core.LabelManaged] == "true" && c.Labels[core.LabelKind] == KindSidecar
}
