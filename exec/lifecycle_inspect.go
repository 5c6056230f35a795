package exec

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/docker-sandbox/docker-sandbox/core"
	"github.com/docker-sandbox/docker-sandbox/exec/helpercall"
	"github.com/docker-sandbox/docker-sandbox/exec/wire"
)

// Details is one element of `docker sandbox inspect`.
type Details struct {
	Sandbox
	Name      string     `json:"name"` // the container's name (also when it is gone)
	StartedAt *time.Time `json:"started_at"`
	// Limits are the container's, as the engine reports them; null without
	// a container.
	Limits *Limits            `json:"limits"`
	Mounts []MountInfo        `json:"mounts"`
	Labels map[string]string  `json:"labels"`
	Egress EgressInfo         `json:"egress"`
	Execs  []ExecInfo         `json:"execs"`
	Helper *HelperStatus      `json:"helper"`
	Data   map[string]VolInfo `json:"data"`
}

// Limits of a sandbox container.
type Limits struct {
	Memory         int64    `json:"memory"`
	MemorySwap     int64    `json:"memory_swap"`
	CPUs           float64  `json:"cpus"`
	Pids           int64    `json:"pids"`
	Nofile         int64    `json:"nofile"`
	TmpSize        int64    `json:"tmp_size"`
	ReadonlyRootfs bool     `json:"readonly_rootfs"`
	User           string   `json:"user"`
	CapDrop        []string `json:"cap_drop"`
	SecurityOpt    []string `json:"security_opt"`
	Runtime        string   `json:"runtime"`
	// Disk is the --disk limit in bytes (0: none) and MaxLifetime the
	// --max-lifetime ("" for none), from the command line of PID 1.
	Disk        int64  `json:"disk"`
	MaxLifetime string `json:"max_lifetime"`
}

// MountInfo is one mount of a sandbox.
type MountInfo struct {
	Type        string `json:"type"`
	Name        string `json:"name"`
	Destination string `json:"destination"`
	RW          bool   `json:"rw"`
}

// EgressInfo is how the sandbox reaches the network.
type EgressInfo struct {
	Mode     string   `json:"mode"` // none, proxy, or a network's name
	Networks []string `json:"networks"`
}

// VolInfo describes one of the sandbox's volumes.
type VolInfo struct {
	Created string            `json:"created"`
	Labels  map[string]string `json:"labels"`
}

// initLimits reads --disk and --max-lifetime from PID 1's command line.
func initLimits(entrypoint []string) (disk int64, maxLifetime string) {
	for i := 0; i+1 < len(entrypoint); i++ {
		switch entrypoint[i] {
		case "--disk":
			disk, _ = strconv.ParseInt(entrypoint[i+1], 10, 64)
		case "--max-lifetime":
			maxLifetime = entrypoint[i+1]
		}
	}
	return disk, maxLifetime
}

// HelperStatus is what `sandbox-helper status` reports from inside a running
// sandbox.
type HelperStatus struct {
	PID1Started *time.Time `json:"pid1_started"`
	Busy        bool       `json:"busy"`
	Processes   []struct {
		PID     int        `json:"pid"`
		Kind    string     `json:"kind"`
		Started *time.Time `json:"started"`
	} `json:"processes"`
	IdleSince *time.Time `json:"idle_since"`
	// Init is PID 1's own account: registered runs, a drain, the disk
	// usage it measured against the limit, when the max lifetime ends it.
	Init *struct {
		Runs        int        `json:"runs"`
		Draining    bool       `json:"draining"`
		DiskLimit   int64      `json:"disk_limit"`
		DiskUsed    int64      `json:"disk_used"` // -1: not measured yet
		DiskScanned *time.Time `json:"disk_scanned"`
		OverLimit   bool       `json:"over_limit"`
		Expires     *time.Time `json:"expires,omitempty"`
		Killed      int        `json:"killed"` // processes PID 1 killed (orphans, stopped or hung wrappers)
		// Kernels are the live kernels (exec --kernel).
		Kernels []struct {
			Lang     string    `json:"lang"`
			PID      int       `json:"pid"`
			Started  time.Time `json:"started"`
			Calls    int       `json:"calls"`
			RSSBytes int64     `json:"rss_bytes,omitempty"`
			Busy     bool      `json:"busy"`
		} `json:"kernels,omitempty"`
	} `json:"init"`
}

// Inspect returns the details of a target. For a running sandbox it runs
// `sandbox-helper status` in it (a process of a few milliseconds, which the
// helper's once-a-second idle check may count as use).
func (m *Manager) Inspect(ctx context.Context, t core.Target, size bool) (*Details, error) {
	return m.inspect(ctx, t, size, true)
}

func (m *Manager) inspect(ctx context.Context, t core.Target, size, again bool) (*Details, error) {
	s, err := m.Find(ctx, t, size)
	if err != nil {
		return nil, err
	}
	d := &Details{Sandbox: *s, Name: t.ContainerName(), Labels: map[string]string{}, Mounts: []MountInfo{}, Execs: s.execs,
		Data: map[string]VolInfo{}}
	if d.Execs == nil {
		d.Execs = []ExecInfo{}
	}
	for _, v := range s.vols {
		d.Data[v.Name] = VolInfo{Created: v.CreatedAt, Labels: v.Labels}
	}
	d.Egress = EgressInfo{Mode: s.Network, Networks: []string{}}
	if s.ctr == nil {
		if len(s.vols) > 0 {
			d.Labels = s.vols[0].Labels
		}
		return d, nil
	}
	c := s.inspect
	if c == nil {
		ci, err := m.Engine.ContainerInspect(ctx, s.ctr.ID)
		if err != nil {
			if isNotFound(err) && again {
				return m.inspect(ctx, t, size, false) // it went away meanwhile
			}
			return nil, core.EngineError(err, "cannot inspect the container of "+t.String())
		}
		c = &ci
	}
	if c.Config != nil {
		d.Labels = c.Config.Labels
	}
	if c.State != nil {
		if st, err := time.Parse(time.RFC3339Nano, c.State.StartedAt); err == nil && !st.IsZero() && st.Year() > 1 {
			st = st.UTC()
			d.StartedAt = &st
		}
	}
	if hc := c.HostConfig; hc != nil {
		l := &Limits{Memory: hc.Memory, MemorySwap: hc.MemorySwap, CPUs: float64(hc.NanoCPUs) / 1e9,
			ReadonlyRootfs: hc.ReadonlyRootfs, CapDrop: hc.CapDrop, SecurityOpt: hc.SecurityOpt, Runtime: hc.Runtime}
		if hc.PidsLimit != nil {
			l.Pids = *hc.PidsLimit
		}
		for _, u := range hc.Ulimits {
			if u != nil && u.Name == "nofile" {
				l.Nofile = u.Hard
			}
		}
		l.TmpSize = tmpfsSize(hc.Tmpfs["/tmp"])
		if c.Config != nil {
			l.User = c.Config.User
			l.Disk, l.MaxLifetime = initLimits(c.Config.Entrypoint)
		}
		d.Limits = l
		if d.Egress.Mode == "" {
			d.Egress.Mode = string(hc.NetworkMode)
		}
	}
	for _, mp := range c.Mounts {
		d.Mounts = append(d.Mounts, MountInfo{Type: string(mp.Type), Name: mp.Name, Destination: mp.Destination, RW: mp.RW})
	}
	if c.NetworkSettings != nil {
		for n := range c.NetworkSettings.Networks {
			if n != "none" {
				d.Egress.Networks = append(d.Egress.Networks, n)
			}
		}
		sortStrings(d.Egress.Networks)
	}
	if c.State != nil && c.State.Running && !c.State.Paused {
		if hs, err := m.helperStatus(ctx, c.ID); err == nil {
			d.Helper = hs
			d.LastUsed = laterUse(d.LastUsed, hs, time.Now())
			for _, p := range hs.Processes {
				if p.Kind == "channel" {
					d.Channel = true // anyone's exec channel, not only this user's
				}
			}
		}
	}
	return d, nil
}

// laterUse is the last use of a sandbox given what the helper reports: its
// idle_since when it is later than what was known and not in the future (a
// time in the future is no evidence of use: sandboxed code can plant one).
func laterUse(known *time.Time, hs *HelperStatus, now time.Time) *time.Time {
	if hs == nil || hs.IdleSince == nil || hs.Busy || hs.IdleSince.After(now) || (known != nil && !hs.IdleSince.After(*known)) {
		return known
	}
	v := hs.IdleSince.UTC()
	return &v
}

// helperStatus runs `sandbox-helper status` in a running container (never
// creating or starting one).
func (m *Manager) helperStatus(ctx context.Context, id string) (*HelperStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	if _, err := helpercall.Do(ctx, m.Engine, helpercall.Call{Container: id,
		Exec: container.ExecOptions{
			User: core.SandboxUser, AttachStdout: true, AttachStderr: true, Cmd: append([]string{core.HelperPath}, wire.StatusArgs{}.Argv()...),
		},
		Stdout: &out, Stderr: &errb,
	}); err != nil {
		_, err = helpercall.Split(err)
		return nil, err
	}
	var hs HelperStatus
	if err := json.Unmarshal(out.Bytes(), &hs); err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "bad answer from sandbox-helper status (%s)", strings.TrimSpace(errb.String()))
	}
	return &hs, nil
}

// tmpfsSize reads size= from tmpfs options.
func tmpfsSize(opts string) int64 {
	for _, o := range strings.Split(opts, ",") {
		if v, ok := strings.CutPrefix(o, "size="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return 0
}

func sortStrings(ss []string) {
	s := sortedStrings(ss)
	copy(ss, s)
}
