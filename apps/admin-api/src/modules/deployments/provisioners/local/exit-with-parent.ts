// Preloaded (--import) into runtimes the local provisioner spawns: when the control plane goes away,
// even by SIGKILL, its IPC channel closes and the runtime shuts down instead of lingering as an orphan.
process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
