package config

// Trust of project files.
//
// A checked-out repository is untrusted input: a pull request from a fork
// runs in CI with its own .docker-sandbox.toml. So a project file is read as
// a request, not as configuration: each of its values applies only when the
// key's trust rule accepts it (it only narrows what the user file and the
// defaults give), unless the user trusted that very file:
//
//   - by path and content: `docker sandbox config trust [FILE]` records the
//     file's path (its folder with symbolic links resolved, plus the name)
//     and the SHA-256 of its content in <docker config dir>/sandbox/trust.json;
//     an edited file is untrusted again;
//   - or for every project file: DOCKER_SANDBOX_TRUST_PROJECT=1.
//
// A value that a rule refuses is ignored (the lower layers' value stays) and
// listed in Config.Refused; the caller warns about it.

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/docker-sandbox/docker-sandbox/egress/policy"
)

// Trust rules: what an untrusted project file may do with a key. Each row of
// keyTable names one.
const (
	// RuleLower: the value may be lowered, never raised.
	RuleLower = "lower"
	// RuleLowerZeroUnlimited: as RuleLower, where 0 means unlimited (the
	// highest value).
	RuleLowerZeroUnlimited = "lower (0 = unlimited)"
	// RuleNone: the value may only be "none" (network).
	RuleNone = "none only"
	// RuleTrusted: only a trusted project file may set the key (it selects
	// what runs, where, or with which data).
	RuleTrusted = "trusted only"
	// RuleAny: any value (it grants nothing).
	RuleAny = "any"
	// RuleOnOnly: the value may be turned on, never off (audit).
	RuleOnOnly = "on only"
)

// TrustEnv trusts every project file when set to 1 (or true).
const TrustEnv = "DOCKER_SANDBOX_TRUST_PROJECT"

// TrustFileName is the trust record: <docker config dir>/UserDir/TrustFileName.
const TrustFileName = "trust.json"

// MaxProjectFileSize caps what is read of a project file.
const MaxProjectFileSize = 1 << 20

// trustRule is a key's rule for untrusted project files. allows reports
// whether v may replace base, the value of the layers below the project
// file; why explains a refusal, given base as text.
type trustRule[T any] struct {
	name   string
	allows func(base, v T) bool
	why    func(base string) string
}

func lowerOnly[T number]() trustRule[T] {
	return trustRule[T]{
		name:   RuleLower,
		allows: func(base, v T) bool { return v <= base },
		why: func(base string) string {
			return "is above " + base + ": an untrusted project file may only lower it"
		},
	}
}

// lowerZeroUnlimited: 0 is unlimited, above every other value.
func lowerZeroUnlimited[T number]() trustRule[T] {
	return trustRule[T]{
		name: RuleLowerZeroUnlimited,
		allows: func(base, v T) bool {
			return base == 0 || (v != 0 && v <= base)
		},
		why: func(base string) string {
			return "is above " + base + " (0 is unlimited): an untrusted project file may only lower it"
		},
	}
}

func trustedOnly[T comparable]() trustRule[T] {
	return trustRule[T]{
		name:   RuleTrusted,
		allows: func(base, v T) bool { return v == base },
		why: func(base string) string {
			return "is ignored: only a trusted project file may set this key (it stays " + base + ")"
		},
	}
}

func noneOrTrusted() trustRule[string] {
	return trustRule[string]{
		name:   RuleNone,
		allows: func(base, v string) bool { return v == "none" || v == base },
		why: func(base string) string {
			return `is ignored: an untrusted project file may only set "none" (it stays ` + base + ")"
		},
	}
}

// onOnly: true (on) applies; false only when the layers below say false.
func onOnly() trustRule[bool] {
	return trustRule[bool]{
		name:   RuleOnOnly,
		allows: func(base, v bool) bool { return v || v == base },
		why: func(base string) string {
			return "is ignored: an untrusted project file may only turn it on (it stays " + base + ")"
		},
	}
}

func anyValue[T any]() trustRule[T] {
	return trustRule[T]{name: RuleAny, allows: func(T, T) bool { return true }, why: func(string) string { return "" }}
}

// TrustRules returns each key's trust rule, by key, for documentation.
func TrustRules() map[string]string {
	m := make(map[string]string, len(keyTable))
	for _, d := range keyTable {
		m[d.name] = d.trust
	}
	return m
}

// Project trust states.
const (
	TrustStateTrusted   = "trusted"   // a record matches path and content
	TrustStateEnv       = "env"       // DOCKER_SANDBOX_TRUST_PROJECT=1
	TrustStateUntrusted = "untrusted" // never trusted
	TrustStateChanged   = "changed"   // trusted, then edited
)

// ProjectTrust is the trust decision about the project file.
type ProjectTrust struct {
	File    string // the project file, as found
	Key     string // its trust key (see TrustKey)
	SHA256  string // of the content read
	Trusted bool
	State   string // TrustState*
}

// Refusal is a value of an untrusted project file that was ignored.
type Refusal struct {
	Key    string // the key, "scope.NAME.KEY" in scope tables
	Value  string // as written in the file
	Source Source
	Reason string // a predicate: `is above 1m0s: ...`
}

// String renders the refusal as a sentence.
func (r Refusal) String() string {
	return fmt.Sprintf("%s: %s = %s %s", fileLoc(r.Source), r.Key, r.Value, r.Reason)
}

// TrustRecord is one trusted project file.
type TrustRecord struct {
	Path      string    `json:"path"`   // see TrustKey
	SHA256    string    `json:"sha256"` // of the content, hex
	TrustedAt time.Time `json:"trusted_at"`
}

type trustFileJSON struct {
	Version int           `json:"version"`
	Files   []TrustRecord `json:"files"`
}

// TrustFilePath returns the trust record of a Docker config directory.
func TrustFilePath(dockerConfigDir string) string {
	return filepath.Join(dockerConfigDir, UserDir, TrustFileName)
}

// TrustKey is the path a trust record is kept under: the file's folder with
// symbolic links resolved, and its own name unresolved. Two ways of naming
// one folder give one key; a project file that is a link to a trusted file
// elsewhere has its own key (its folder's), so it is not trusted by that.
func TrustKey(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.Base(abs)), nil
}

// LoadTrust reads a trust record file; a missing file holds no records.
func LoadTrust(path string) ([]TrustRecord, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f trustFileJSON
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %v (fix it or remove it; trusting again writes a new one)", path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("%s: version %d, want 1", path, f.Version)
	}
	return f.Files, nil
}

// SaveTrust writes the records, sorted by path, through a temporary file
// and a rename (0600, in a 0700 folder).
func SaveTrust(path string, recs []TrustRecord) error {
	recs = slices.Clone(recs)
	slices.SortFunc(recs, func(a, b TrustRecord) int { return cmp.Compare(a.Path, b.Path) })
	if recs == nil {
		recs = []TrustRecord{}
	}
	b, err := json.MarshalIndent(trustFileJSON{Version: 1, Files: recs}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return policy.WriteAtomic(path, append(b, '\n'), 0o600)
}

// ReadProjectFile reads a project file: a regular file (through links) of
// at most MaxProjectFileSize bytes. It returns the bytes and their SHA-256,
// so that what is checked is what is parsed.
func ReadProjectFile(path string) ([]byte, string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, "", err
	}
	if !fi.Mode().IsRegular() {
		return nil, "", fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	if fi2, err := f.Stat(); err != nil || !fi2.Mode().IsRegular() || !os.SameFile(fi, fi2) {
		return nil, "", fmt.Errorf("%s changed while it was opened", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxProjectFileSize+1))
	if err != nil {
		return nil, "", err
	}
	if len(b) > MaxProjectFileSize {
		return nil, "", fmt.Errorf("%s is over %d KiB", path, MaxProjectFileSize>>10)
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:]), nil
}

// trustFromEnv reads TrustEnv: 1/true/yes trust, 0/false/no or empty do not.
func trustFromEnv(lookup func(string) (string, bool)) (bool, error) {
	v, _ := lookup(TrustEnv)
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes":
		return true, nil
	case "", "0", "false", "no":
		return false, nil
	}
	return false, &Error{Code: CodeBadConfig, Source: Source{Kind: KindEnv, Name: TrustEnv},
		Msg: fmt.Sprintf("config: env %s: %q is not 1 or 0", TrustEnv, v)}
}

// decideTrust decides whether the project file at key with content sum is
// trusted.
func decideTrust(file, key, sum string, byEnv bool, recs []TrustRecord) ProjectTrust {
	t := ProjectTrust{File: file, Key: key, SHA256: sum, State: TrustStateUntrusted}
	for _, r := range recs {
		if r.Path != key {
			continue
		}
		if r.SHA256 == sum {
			t.Trusted, t.State = true, TrustStateTrusted
			return t
		}
		t.State = TrustStateChanged
	}
	if byEnv {
		t.Trusted, t.State = true, TrustStateEnv
	}
	return t
}

// Scope tables of untrusted project files: a key is taken when every
// destination it grants is granted by the same key of the same scope below
// the project file (the user file; without one, nothing is granted and the
// ports are the default ones). It then replaces that key, as with trusted
// files.

// coverHosts returns "" when every pattern of proj is covered by one of
// base, else why not.
func coverHosts(base, proj []string) string {
	var bs []string
	for _, s := range base {
		if p, err := policy.ParsePattern(s); err == nil {
			bs = append(bs, p.String())
		}
	}
	for _, s := range proj {
		p, err := policy.ParsePattern(s)
		if err != nil {
			return fmt.Sprintf("%q is not a host pattern", s)
		}
		if !patternCovered(p.String(), bs) {
			return fmt.Sprintf("grants %s, which the user file does not grant this scope", p)
		}
	}
	return ""
}

// patternCovered: ps (canonical) matches only names that one of bs does.
func patternCovered(ps string, bs []string) bool {
	name := strings.TrimPrefix(ps, "*.")
	for _, b := range bs {
		switch {
		case b == "*", b == ps:
			return true
		case ps != "*" && strings.HasPrefix(b, "*.") && strings.HasSuffix(name, b[1:]):
			// "x.example.com" and "*.x.example.com" under "*.example.com".
			return true
		}
	}
	return false
}

func coverPorts(base, proj []int) string {
	if len(base) == 0 {
		base = policy.DefaultPorts
	}
	if len(proj) == 0 {
		proj = policy.DefaultPorts
	}
	for _, p := range proj {
		if !slices.Contains(base, p) {
			return fmt.Sprintf("grants port %d, which the user file does not grant this scope", p)
		}
	}
	return ""
}

func coverCIDRs(base, proj []string) string {
	var bs []netip.Prefix
	for _, s := range base {
		if p, err := policy.ParseCIDR(s); err == nil {
			bs = append(bs, p)
		}
	}
	for _, s := range proj {
		p, err := policy.ParseCIDR(s)
		if err != nil {
			return fmt.Sprintf("%q is not a CIDR prefix", s)
		}
		ok := false
		for _, b := range bs {
			if b.Addr().Is4() == p.Addr().Is4() && b.Bits() <= p.Bits() && b.Contains(p.Addr()) {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Sprintf("grants %s, which the user file does not grant this scope", p)
		}
	}
	return ""
}

// ProjectKeys checks the content of a project file as a trusted one and
// returns the keys it sets ("scope.NAME" for scope tables), in key-table
// order then by name.
func ProjectKeys(path string, data []byte) ([]string, error) {
	c := Default()
	if err := c.applyFile(KindProject, path, data, nil); err != nil {
		return nil, err
	}
	var out []string
	for _, d := range keyTable {
		if c.Source(d.name).Kind == KindProject {
			out = append(out, d.name)
		}
	}
	var scopes []string
	for n := range c.Scopes {
		scopes = append(scopes, scopeTable+"."+n)
	}
	slices.Sort(scopes)
	return append(out, scopes...), nil
}
