-- -*- lua -*-
-- Lmod modulefile for tfbarrier 0.1.0. Install tfbarrier under one prefix per
-- version, then copy this file to a directory in MODULEPATH as
-- tfbarrier/0.1.0.lua:
--   cmake --install build/package --prefix /opt/tfbarrier/0.1.0
-- Set `root` below if the prefix is another one.
local root = "/opt/tfbarrier/0.1.0"

help([[
tfbarrier 0.1.0: a named, reusable barrier for shell-driven cluster jobs.

In a job, every task runs
    tfbarrier wait --name epoch3
and blocks until all tasks have arrived. The chief (rank 0) can arrive with
--chief, evaluate, and run `tfbarrier decide continue` or `decide stop`:
every other task's wait then exits 0 or 1. The number of tasks, the ranks and
the host's address come from Slurm, torchrun or MPI; no host needs starting.

    srun tfbarrier config      what each task resolves, and from where
    man tfbarrier              commands, options, exit codes, examples

Shell completion: source ]] .. root .. [[/share/bash-completion/completions/tfbarrier
(bash), or add ]] .. root .. [[/share/zsh/vendor-completions to fpath (zsh).
]])

whatis("Name: tfbarrier")
whatis("Version: 0.1.0")
whatis("Category: tools")
whatis("Description: a named, reusable barrier for shell-driven cluster jobs (Slurm, torchrun, MPI)")

prepend_path("PATH", pathJoin(root, "bin"))
prepend_path("MANPATH", pathJoin(root, "share/man"))
-- A MANPATH without an empty entry hides the system's pages: keep one (the
-- trailing ':'), so that man still searches its default path.
append_path("MANPATH", "")
