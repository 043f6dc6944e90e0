package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// shells are those "dbiolat completion" writes a script for.
var shells = []string{"bash", "zsh", "fish"}

// newCompletionCommand prints a completion script. The scripts are
// cobra's: they ask "dbiolat __complete ARGS…" for the candidates, so
// commands and flags come from the binary the user runs.
func newCompletionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "print a shell completion script: commands, their options, recording files",
		Long: `Load it in the running shell:
  bash: source <(dbiolat completion bash)
  zsh:  source <(dbiolat completion zsh)
  fish: dbiolat completion fish | source
or install it where the shell looks for completions, e.g.
  dbiolat completion bash > /etc/bash_completion.d/dbiolat`,
		ValidArgs: shells,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("give one shell: bash, zsh or fish")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			w, root := cmd.OutOrStdout(), cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(w, true)
			case "zsh":
				return root.GenZshCompletion(w)
			case "fish":
				return root.GenFishCompletion(w, true)
			}
			return fmt.Errorf("no completion for %q: give bash, zsh or fish", args[0])
		},
	}
}
