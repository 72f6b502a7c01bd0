/* Each rank reports its host and the CPU mask the kernel actually applied,
 * so the check can compare it with what srun --cpu-bind=verbose claims. */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

static unsigned long long affinity_mask(void)
{
    cpu_set_t set;
    unsigned long long mask = 0;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 0;
    for (int cpu = 0; cpu < 64; cpu++)
        if (CPU_ISSET(cpu, &set))
            mask |= 1ULL << cpu;
    return mask;
}

int main(int argc, char **argv)
{
    int rank, size;
    char host[256];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof(host));
    printf("rank %d of %d host %s affinity 0x%llx\n", rank, size, host, affinity_mask());
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
