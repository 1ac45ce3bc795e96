! Fortran ring: the same known answer as mpi_ring.c (ROUNDS*N MPI_SEND and MPI_RECV,
! BYTES bytes each, tag = round), through the Fortran bindings.
program ring
  use mpi
  implicit none
  integer :: rank, nprocs, ierr, r, rounds, nbytes, next, prev
  integer :: status(MPI_STATUS_SIZE)
  character(len=32) :: arg
  character, allocatable :: buf(:)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call get_command_argument(1, arg); read(arg, *) rounds
  call get_command_argument(2, arg); read(arg, *) nbytes
  allocate(buf(nbytes))
  next = mod(rank + 1, nprocs)
  prev = mod(rank - 1 + nprocs, nprocs)
  do r = 0, rounds - 1
    if (rank == 0) then
      call MPI_Send(buf, nbytes, MPI_BYTE, next, r, MPI_COMM_WORLD, ierr)
      call MPI_Recv(buf, nbytes, MPI_BYTE, prev, r, MPI_COMM_WORLD, status, ierr)
    else
      call MPI_Recv(buf, nbytes, MPI_BYTE, prev, r, MPI_COMM_WORLD, status, ierr)
      call MPI_Send(buf, nbytes, MPI_BYTE, next, r, MPI_COMM_WORLD, ierr)
    end if
  end do
  call MPI_Finalize(ierr)
  if (rank == 0) print '(a)', 'ok'
end program ring
