package egress

import (
	"archive/tar"
	"bufio"
	"context"
	"io"
	"sort"
	"strings"

	"github.com/docker/docker/api/types/network"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
	"github.com/docker-sandbox/docker-sandbox/egress/proxy"
)

// Cleared is what ClearPolicy did.
type Cleared struct {
	// Existed: the scope had a policy before the call.
	Existed bool
	// Removed: the scope's entry (policy and credential) is gone. False
	// when sandboxes of the scope still hold its credential: the policy is
	// then emptied instead (everything denied).
	Removed bool
	// Sandboxes are the containers on the scope's network (besides the
	// sidecar), sorted.
	Sandboxes []string
}

// ClearPolicy removes a scope's policy and credential from the sidecar,
// so that `egress status` no longer lists it. While proxy-mode sandboxes
// of the scope exist they hold the credential (in their proxy URL), so the
// entry cannot go without cutting them off for good: the policy is emptied
// instead (everything denied at once) and the entry stays until they are
// removed. The sidecar must exist (a stopped one is started, as for
// SetPolicy).
func (m *Manager) ClearPolicy(ctx context.Context, scope string) (Cleared, error) {
	var res Cleared
	c, err := m.RunningSidecar(ctx)
	if err != nil {
		return res, err
	}
	st, err := m.ReadState(ctx, c)
	if err != nil {
		return res, err
	}
	_, res.Existed = st.Policy.Scopes[scope]
	n, err := m.Engine.NetworkInspect(ctx, NetworkName(scope), network.InspectOptions{})
	switch {
	case notFound(err):
	case err != nil:
		return res, core.EngineError(err, "cannot inspect network "+NetworkName(scope))
	default:
		if got, _, ok := scopeNetwork(n); ok && got == scope {
			for id, ep := range n.Containers {
				if id != c.ID {
					res.Sandboxes = append(res.Sandboxes, strings.TrimPrefix(ep.Name, "/"))
				}
			}
			sort.Strings(res.Sandboxes)
		}
	}
	if !res.Existed {
		return res, nil
	}
	if len(res.Sandboxes) > 0 {
		_, err := m.setScope(ctx, c.ID, scope, &policy.Rules{Allow: []string{}, AllowPorts: []int{}, AllowCIDRs: []string{}})
		return res, err
	}
	var errb strings.Builder
	code, err := m.helperExec(ctx, c.ID, proxy.PolicyArgs{File: PolicyFile, Op: proxy.PolicyRm, Scope: scope}.Argv(), nil, nil, &errb)
	if err != nil {
		return res, err
	}
	if code != 0 {
		return res, core.Errorf(CodeEgressUnavailable, "the egress sidecar could not remove the policy of %s: %s", scope,
			strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(errb.String()), "sandbox-helper proxy policy: ")))
	}
	res.Removed = true
	return res, nil
}

// StoredPolicy tells whether the sidecar's policy file holds an entry for
// scope, reading the file from the sidecar container (running or stopped:
// nothing is started or run in it). known is false when there is no
// sidecar container (its volume may still hold policies).
func (m *Manager) StoredPolicy(ctx context.Context, scope string) (has, known bool, err error) {
	c, err := m.sidecar(ctx)
	if err != nil || c == nil {
		return false, false, err
	}
	b, found, err := m.readFile(ctx, c.ID, PolicyFile)
	if err != nil {
		return false, false, err
	}
	if !found {
		return false, true, nil
	}
	f, err := policy.Parse(b)
	if err != nil {
		return false, false, core.Errorf(CodeEgressUnavailable, "the egress sidecar's policy file does not parse: %v", err)
	}
	_, has = f.Scopes[scope]
	return has, true, nil
}

// stoppedLogs writes the decision log of a sidecar that exists but does
// not run, read through the Engine API from the stopped container (its
// volume): the rotated file, then the current one; the last tail lines
// when tail >= 0. Nothing is started.
func (m *Manager) stoppedLogs(ctx context.Context, id string, tail int, out io.Writer) error {
	var ring []string
	emit := func(line string) error {
		if tail < 0 {
			_, err := io.WriteString(out, line+"\n")
			return err
		}
		if tail > 0 {
			ring = append(ring, line)
			if len(ring) > tail {
				ring = ring[1:]
			}
		}
		return nil
	}
	for _, p := range []string{LogFile + ".1", LogFile} {
		if err := m.eachLogLine(ctx, id, p, emit); err != nil {
			return err
		}
	}
	for _, l := range ring {
		if _, err := io.WriteString(out, l+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// eachLogLine calls f with each complete line of one log file of a
// container (none when the file does not exist).
func (m *Manager) eachLogLine(ctx context.Context, id, path string, f func(string) error) error {
	rc, _, err := m.Engine.CopyFromContainer(ctx, id, path)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return core.EngineError(err, "cannot read "+path+" in the egress sidecar")
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil || h.Typeflag != tar.TypeReg {
		return core.Errorf(CodeEgressUnavailable, "%s in the egress sidecar is not a regular file", path)
	}
	br := bufio.NewReaderSize(tr, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			return nil // a partial last line is still being written
		}
		if err != nil {
			return core.Wrap(CodeEgressUnavailable, err, "cannot read %s in the egress sidecar", path)
		}
		if err := f(strings.TrimSuffix(line, "\n")); err != nil {
			return err
		}
	}
}
