package plugin

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

// configuredLanguages turns the [lang.NAME] tables of c into languages for
// sbexec.DetectLanguage, sorted by name.
func configuredLanguages(c *config.Config) []sbexec.Language {
	var out []sbexec.Language
	for _, n := range c.LangNames() {
		l := c.Langs[n]
		exts := make([]string, len(l.Extensions))
		for i, e := range l.Extensions {
			exts[i] = strings.ToLower(e)
		}
		lang := sbexec.Language{Name: n, Interps: l.Interpreter[:1], InterpArgs: slices.Clone(l.Interpreter[1:]),
			Exts: exts, Shebang: slices.Clone(l.Shebang)}
		if len(exts) > 0 {
			lang.Ext = exts[0]
		}
		out = append(out, lang)
	}
	return out
}

// completeLangs completes --lang: the built-in languages and the
// configured ones.
func completeLangs() completion {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		names := slices.Clone(sbexec.LanguageNames)
		if c, err := loadConfigQuiet(); err == nil {
			names = append(names, c.LangNames()...)
		}
		return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}
