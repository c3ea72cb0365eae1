package main

import (
	"io"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/gctune"
	"github.com/berth-project/berth/internal/logging"
)

// applyGC sets the config's garbage collection policy (runtime block,
// package gctune) for a long-running command, before its roles start and
// before any cold-start load (package loadgc) opens its window, and
// returns what puts the process's settings back when the command returns
// to its caller (the CLI's tests run commands in one process).
func applyGC(cfg *configs.Config, log hclog.Logger) (restore func()) {
	return gctune.Apply(cfg.Runtime, log).Restore
}

// benchGC is applyGC for `berth bench`, whose in-process Berth runs with
// its -config file (its runtime block) or the defaults; the file's own
// mistakes are the tool's to report, so they fall back to the defaults
// here.
func benchGC(configPath string, stderr io.Writer) (restore func()) {
	cfg := configs.Defaults()
	if configPath != "" {
		if c, err := configs.Load(configPath); err == nil {
			cfg = c
		}
	}
	return applyGC(cfg, logging.New(cfg.Log, stderr).Named("bench"))
}
