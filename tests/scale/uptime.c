/* LD_PRELOAD for the scale rig's resumed CLOUD nodes: sysinfo() reports the uptime since RIG_BOOT_EPOCH (when the rig
 * "booted" the node) instead of the host's. slurmd reports its boot time from sysinfo(); with the host's uptime a
 * resumed node seems to have booted before its resume, and slurmctld waits for it until ResumeTimeout. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/sysinfo.h>
#include <time.h>

int sysinfo(struct sysinfo *info)
{
	static int (*real)(struct sysinfo *);
	const char *boot = getenv("RIG_BOOT_EPOCH");
	int rc;

	if (!real)
		real = (int (*)(struct sysinfo *))dlsym(RTLD_NEXT, "sysinfo");
	rc = real(info);
	if (rc == 0 && boot) {
		long up = (long)time(NULL) - atol(boot);
		info->uptime = up > 0 ? up : 0; /* 0, not 1: a boot one second before the resume counts as stale */
	}
	return rc;
}
