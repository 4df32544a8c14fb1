package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/api"
)

func newOutcomesCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "outcomes", Short: "Post outcomes of predictions (POST /v1/outcomes; docs/experiments.md)"}
	cmd.AddCommand(newOutcomesPostCmd())
	return cmd
}

func newOutcomesPostCmd() *cobra.Command {
	var server string
	var batch int
	cmd := &cobra.Command{
		Use:   "post FILE|-",
		Short: "Post outcomes read as JSON lines ({\"requestId\",\"instance\",\"name\",\"value\",\"at\"}) in batches; prints what was accepted, duplicate and unknown",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if batch < 1 || batch > 10000 {
				return fmt.Errorf("--batch must be 1 to 10000, got %d", batch)
			}
			var in io.Reader = cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			c := apiClient(cmd, server)
			var total api.OutcomeResult
			var b api.OutcomeBatch
			flush := func() error {
				if len(b.Outcomes) == 0 {
					return nil
				}
				r, err := c.PostOutcomes(cmd.Context(), b)
				if err != nil {
					return err
				}
				total.Accepted += r.Accepted
				total.Duplicates += r.Duplicates
				total.Unknown += r.Unknown
				if len(total.UnknownIDs) < 10 {
					total.UnknownIDs = append(total.UnknownIDs, r.UnknownIDs...)
				}
				b.Outcomes = b.Outcomes[:0]
				return nil
			}
			sc := bufio.NewScanner(in)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			line := 0
			for sc.Scan() {
				line++
				if len(sc.Bytes()) == 0 {
					continue
				}
				var o api.Outcome
				dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&o); err != nil {
					return fmt.Errorf("%s:%d: %v (each line is {\"requestId\",\"instance\",\"name\",\"value\",\"at\"})", args[0], line, err)
				}
				b.Outcomes = append(b.Outcomes, o)
				if len(b.Outcomes) == batch {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			if err := sc.Err(); err != nil {
				return err
			}
			if err := flush(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "accepted %d, duplicates %d, unknown %d\n", total.Accepted, total.Duplicates, total.Unknown)
			if len(total.UnknownIDs) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "unknown request ids (first %d): %v\n", min(len(total.UnknownIDs), 10), total.UnknownIDs[:min(len(total.UnknownIDs), 10)])
			}
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().IntVar(&batch, "batch", 1000, "outcomes per POST (1 to 10000)")
	return cmd
}
