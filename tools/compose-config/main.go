// compose-config loads compose files with compose-go, the Compose Specification's reference loader that
// `docker compose` itself uses, and prints the resolved project, as `docker compose config` does, without a
// container engine. It exits non-zero with the loader's message when a file is not a valid compose project.
//
//	compose-config [--format yaml|json] [--profile NAME]... [--env-file FILE] -f FILE [-f FILE]...
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/cli"
)

type list []string

func (l *list) String() string     { return fmt.Sprint(*l) }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var files, profiles, envFiles list
	format := flag.String("format", "yaml", "yaml or json")
	flag.Var(&files, "f", "compose file (repeatable)")
	flag.Var(&profiles, "profile", "profile to enable (repeatable)")
	flag.Var(&envFiles, "env-file", "env file for interpolation (default: .env beside the first file)")
	flag.Parse()
	if len(files) == 0 {
		fmt.Fprintln(os.Stderr, "compose-config: at least one -f FILE is needed")
		os.Exit(2)
	}
	dir, err := filepath.Abs(filepath.Dir(files[0]))
	if err != nil {
		fail(err)
	}
	opts, err := cli.NewProjectOptions(files,
		cli.WithWorkingDirectory(dir),
		cli.WithEnvFiles(envFiles...),
		cli.WithDotEnv,
		cli.WithOsEnv,
		cli.WithProfiles(profiles),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		fail(err)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		fail(err)
	}
	var out []byte
	if *format == "json" {
		out, err = project.MarshalJSON()
	} else {
		out, err = project.MarshalYAML()
	}
	if err != nil {
		fail(err)
	}
	os.Stdout.Write(out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "compose-config:", err)
	os.Exit(1)
}
