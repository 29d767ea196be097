package main

// The command table: node's subcommands, each its own file. It fills
// table (main.go) before main runs; nothing reads this file's names, so
// the table depends on the commands, and no command on the table.

func init() {
	table = []namedCommand{
		{"serve", runServe}, {"read", runRead}, {"prepare", runPrepare}, {"attach", runAttach},
		{"run", runRun}, {"nvmet", runNVMet}, {"nvmeof-read", runNVMeOFRead}, {"nvmeof-clean", runNVMeOFClean}, {"devices", runDevices}, {"host", runHost}, {"version", runVersion},
	}
}
