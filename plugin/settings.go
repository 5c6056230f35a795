package plugin

import (
	"os"

	"github.com/docker/cli/cli/command"
	cliconfig "github.com/docker/cli/cli/config"

	sbexec "github.com/docker-sandbox/docker-sandbox/exec"
	"github.com/docker-sandbox/docker-sandbox/images"
	"github.com/docker-sandbox/docker-sandbox/plugin/config"
)

// loadConfig reads the user file, the project file and the environment.
func loadConfig() (*config.Config, error) {
	wd, _ := os.Getwd()
	c, err := config.Load(config.LoadOptions{DockerConfigDir: cliconfig.Dir(), WorkDir: wd, LookupEnv: os.LookupEnv})
	if err != nil {
		return nil, asConfigError(err)
	}
	return c, nil
}

func asConfigError(err error) error {
	if ce, ok := err.(*config.Error); ok {
		code := ce.Code
		if code == "" {
			code = sbexec.CodeBadConfig
		}
		return &sbexec.Error{Code: code, Message: ce.Error(), Exit: 125, Err: err}
	}
	return sbexec.Wrap(sbexec.CodeBadConfig, err, "configuration")
}

// builder returns the image builder for the CLI's engine.
func builder(dockerCli command.Cli, c *config.Config) *images.Builder {
	return &images.Builder{Engine: dockerCli.Client(), Version: Version, Base: c.RuntimeBase, Progress: dockerCli.Err()}
}

// manager returns the sandbox manager for the CLI's engine.
func manager(dockerCli command.Cli, c *config.Config) *sbexec.Manager {
	return &sbexec.Manager{Engine: dockerCli.Client(), Images: builder(dockerCli, c), Version: Version, MaxSandboxes: c.MaxSandboxes}
}
