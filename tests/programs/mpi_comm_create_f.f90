! Fortran: a first communicator from MPI_Comm_create, everything else derived from it (as
! the Fortran applications of the issue do). 4 ranks. sub = Comm_create(WORLD,
! Group_incl(world's group, (/3, 1, 2/))): ranks 0, 1, 2 are world ranks 3, 1, 2 (world
! rank 0 gets MPI_COMM_NULL); dup = Comm_dup(sub); half = Comm_split(dup, 0 or
! MPI_UNDEFINED for rank 2, -rank): world 1 then world 3. ROUNDS times: a ring r -> r + 1
! on sub (16 bytes), r -> r + 2 on dup (8 bytes), an exchange on half (24 bytes), an
! Allreduce on sub and a Barrier on half.
! Known answer (world ranks, per round): 1->2 16 B; 1->3 8 + 24 B; 2->1 8 B; 2->3 16 B;
! 3->1 16 + 24 B; 3->2 8 B; 5 collective exits.
program comm_create_f
  use mpi
  implicit none
  integer :: ierr, rank, nprocs, wg, g, sub, dup, half, r, h, i, rounds, x, y
  integer :: incl(3)
  integer :: status(MPI_STATUS_SIZE)
  character(len=32) :: arg
  character :: out(24), inb(24)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call get_command_argument(1, arg); read(arg, *) rounds
  out = 'x'
  call MPI_Comm_group(MPI_COMM_WORLD, wg, ierr)
  incl = (/ 3, 1, 2 /)
  call MPI_Group_incl(wg, 3, incl, g, ierr)
  call MPI_Comm_create(MPI_COMM_WORLD, g, sub, ierr)
  if (sub /= MPI_COMM_NULL) then
    call MPI_Comm_rank(sub, r, ierr)
    call MPI_Comm_dup(sub, dup, ierr)
    if (r == 2) then
      call MPI_Comm_split(dup, MPI_UNDEFINED, -r, half, ierr)
    else
      call MPI_Comm_split(dup, 0, -r, half, ierr)
    end if
    do i = 0, rounds - 1
      call MPI_Sendrecv(out, 16, MPI_BYTE, mod(r + 1, 3), i, inb, 16, MPI_BYTE, &
                        mod(r + 2, 3), i, sub, status, ierr)
      call MPI_Sendrecv(out, 8, MPI_BYTE, mod(r + 2, 3), i, inb, 8, MPI_BYTE, &
                        mod(r + 1, 3), i, dup, status, ierr)
      x = rank
      call MPI_Allreduce(x, y, 1, MPI_INTEGER, MPI_SUM, sub, ierr)
      if (half /= MPI_COMM_NULL) then
        call MPI_Comm_rank(half, h, ierr)
        call MPI_Sendrecv(out, 24, MPI_BYTE, 1 - h, 3, inb, 24, MPI_BYTE, 1 - h, 3, &
                          half, status, ierr)
        call MPI_Barrier(half, ierr)
      end if
    end do
  end if
  call MPI_Group_free(g, ierr)
  call MPI_Group_free(wg, ierr)
  call MPI_Finalize(ierr)
  if (rank == 0) print '(a)', 'ok'
end program comm_create_f
