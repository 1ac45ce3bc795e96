! Sampled stacks of a Fortran program built -O2 (docs/sampling.md): MAIN__ -> outer ->
! inner, inner spinning for 0.5 s of wall time (system_clock reads the clock through the
! vDSO). External procedures, outer in a file of its own (sampled_chain_outer_f.f90):
! gfortran 12 has no noinline attribute, and does not inline across files.
subroutine inner(secs, sink)
  implicit none
  real(8), intent(in) :: secs
  integer(8), intent(inout) :: sink
  integer(8) :: t0, t, rate, x
  integer :: i
  call system_clock(t0, rate)
  x = sink
  do
    do i = 1, 1048576
      x = ieor(x * 25214903917_8 + 11_8, ishft(x, -7))
    end do
    sink = x
    call system_clock(t)
    if (dble(t - t0) / dble(rate) >= secs) exit
  end do
end subroutine inner

program sampled
  implicit none
  integer(8) :: sink = 1
  call outer(0.5d0, sink)
  print *, sink
end program sampled
