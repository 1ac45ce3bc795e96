"""An mpi4py program as Python users write one: pickled objects (lowercase calls) and
buffers (uppercase calls), point-to-point and collectives. Usage: mpi4py_exchange.py N
(rounds). Known counts per round with P ranks: P sendrecv of a dict around a ring, one
buffer Send/Recv from rank 0 to rank 1, one allreduce and one bcast, and a pickled
send/recv from rank 0 to rank P-1."""
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
buf = bytearray(8000)
for i in range(rounds):
    got = comm.sendrecv({"round": i, "from": rank}, dest=(rank + 1) % size,
                        source=(rank - 1) % size)
    assert got["from"] == (rank - 1) % size
    if rank == 0:
        comm.Send([buf, MPI.BYTE], dest=1, tag=i)
    elif rank == 1:
        comm.Recv([buf, MPI.BYTE], source=0, tag=i)
    total = comm.allreduce(i * rank)
    value = comm.bcast(total if rank == 0 else None, root=0)
    assert value == i * size * (size - 1) // 2
    if rank == 0:
        comm.send(i, dest=size - 1, tag=7)
    elif rank == size - 1:
        assert comm.recv(source=0, tag=7) == i
print(rank, "done")
