package exec

import (
	"context"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/egress/policy"
)

// Network is what a proxy-mode sandbox needs of the egress side: its
// scope's network with the sidecar on it and the scope's credential, made
// ready before the sandbox is created, removed again when a run fails
// before a sandbox uses it and when the scope is removed; and the egress
// containers' part of prune. egress.Manager implements it; the plugin wires
// it into the Manager (as Images).
type Network interface {
	// Attach makes the scope ready for a proxy-mode sandbox. rules, when
	// not nil, replace the scope's policy (nil keeps the stored one). env
	// is the environment of the scope's existing sandbox (nil: none): its
	// proxy settings are reused as they are when rules is nil.
	Attach(ctx context.Context, scope string, rules *policy.Rules, env []string) (Attachment, error)
	// Release removes the scope's network when no container but the
	// sidecar is on it, and reports whether it removed one; a network of
	// that name that is not the plugin's is left alone.
	Release(ctx context.Context, scope string) (bool, error)
	// Scopes lists the scopes that have a network of the plugin's (with
	// extra label filters).
	Scopes(ctx context.Context, labels []string) ([]string, error)
	// PrunePlan decides about the egress containers among cs (the plugin's
	// containers): the ones to remove, given whether a sandbox uses the
	// proxy, and the ones that stay. Containers not of the egress side are
	// in neither.
	PrunePlan(cs []container.Summary, proxyUsed bool, now time.Time, grace time.Duration) (remove []PruneItem, survivors []container.Summary)
}

// Attachment is what a proxy-mode sandbox of a scope is created with.
type Attachment struct {
	Network string // the scope's network
	// NetworkCreated is set when this call made the network.
	NetworkCreated bool
	// Env holds HTTP_PROXY, HTTPS_PROXY, their lower-case forms, NO_PROXY.
	Env []string
	// DNS is the sandbox's resolver: an address nothing answers on, with
	// DNSOptions making lookups fail fast.
	DNS        []string
	DNSOptions []string
	ProxyURL   string
	// Rules is the scope's policy, unless Known.
	Rules policy.Rules
	// Known is set when the existing sandbox's proxy URL was reused and
	// the policy not looked at.
	Known bool
}

// Joined is a sandbox spec's network as AttachNetwork made it ready.
type Joined struct {
	Attachment
	m     *Manager
	scope string
}

// Empty reports whether the scope's policy, as this call saw it, refuses
// every connection.
func (j *Joined) Empty() bool {
	return j != nil && !j.Known && len(j.Rules.Allow) == 0 && len(j.Rules.AllowCIDRs) == 0
}

// Failed undoes what AttachNetwork made when the run failed without
// creating the sandbox (created false): a failed call leaves no network
// behind (the scope's credential and policy stay, as data).
func (j *Joined) Failed(ctx context.Context, created bool) {
	if j == nil || !j.NetworkCreated || created {
		return
	}
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, _ = j.m.Network.Release(bg, j.scope)
}

// AttachNetwork readies the network of a proxy-mode spec (Network "proxy")
// through m.Network and sets the spec's NetworkAttach, DNS, DNSOptions and
// Env; rules, when not nil, replace the scope's policy. It returns nil for
// the other modes.
func (m *Manager) AttachNetwork(ctx context.Context, spec *Spec, rules *policy.Rules) (*Joined, error) {
	if spec.Network != "proxy" {
		return nil, nil
	}
	if m.Network == nil {
		return nil, core.Errorf(core.CodeInternal, "--network proxy needs the egress side, which this call was not given")
	}
	// Before the sidecar is started: Podman is refused (podman.go).
	if podman, err := m.engineIsPodman(ctx); err != nil {
		return nil, err
	} else if podman {
		return nil, podmanRefuse(*spec)
	}
	// The environment of the target's existing sandbox, when the container
	// of that name is that sandbox (name, labels and kind: a look-alike's
	// environment is never reused).
	var env []string
	if c, err := m.Engine.ContainerInspect(ctx, spec.ContainerName()); err == nil && isSandboxOf(c, spec.Target) {
		env = c.Config.Env
	}
	att, err := m.Network.Attach(ctx, spec.Scope, rules, env)
	if err != nil {
		return nil, err
	}
	spec.NetworkAttach, spec.DNS, spec.DNSOptions, spec.Env = att.Network, att.DNS, att.DNSOptions, att.Env
	return &Joined{Attachment: att, m: m, scope: spec.Scope}, nil
}

// isSandboxOf reports whether c is the sandbox container of t.
func isSandboxOf(c container.InspectResponse, t core.Target) bool {
	if c.ContainerJSONBase == nil || c.Config == nil {
		return false
	}
	got, ok := core.ParseContainerName(c.Name)
	l := c.Config.Labels
	return ok && got == t && l[core.LabelManaged] == "true" && l[core.LabelKind] == core.KindSandbox &&
		l[core.LabelScope] == t.Scope && l[core.LabelSession] == t.Session
}
