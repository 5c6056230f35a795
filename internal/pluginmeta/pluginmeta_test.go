package pluginmeta

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/docker/cli/cli-plugins/metadata"
)

// encode is what docker/cli's plugin.RunPlugin does with the metadata.
func encode(t *testing.T, m metadata.Metadata) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "     ")
	if err := enc.Encode(m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestJSONMatchesRunPlugin(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	for _, v := range []string{"0.1.0", "1.2.3-rc.1+g0123abc", `we"ird\ver<s>&ion` + "\t\x01\u2028é\xff"} {
		Version = v
		want := encode(t, metadata.Metadata{SchemaVersion: SchemaVersion, Vendor: Vendor, Version: Version, ShortDescription: ShortDescription, URL: URL})
		if got := JSON(); !bytes.Equal(got, want) {
			t.Errorf("version %q:\n got %q\nwant %q", v, got, want)
		}
	}
}
