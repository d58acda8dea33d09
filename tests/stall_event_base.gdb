# gdb script for RMASTORE_TEST_STALL_GDB (tests/failure/stall_watch.hpp): prints the state
# of opal's libevent base in a stalled process, and for each descriptor its events, whether
# each is inserted or active (evcb_flags: 0x02 inserted, 0x08 active, 0x80 initialised), its
# callback and the first words of its argument (for btl/tcp's receive handler, the endpoint:
# endpoint_sd and endpoint_sd_next are the 17th and 18th words, its two locks follow). It needs
# the debug information of the libevent that scripts/setup.sh builds with Open MPI.
set $b = *(struct event_base **)&opal_sync_event_base
printf "base running_loop %d count %d active %d owner %lu nentries %d\n", $b->running_loop, $b->event_count, $b->event_count_active, $b->th_owner_id, $b->io.nentries
set $i = 0
while $i < 40
  if $i < $b->io.nentries && $b->io.entries[$i] != 0
    set $m = (struct evmap_io *)$b->io.entries[$i]
    printf "fd %d nread %d nwrite %d\n", $i, $m->nread, $m->nwrite
    set $e = $m->events.lh_first
    while $e != 0
      printf "  ev %p fd %d evflags 0x%x cbflags 0x%x res 0x%x arg %p cb ", $e, $e->ev_fd, $e->ev_events, $e->ev_evcallback.evcb_flags, $e->ev_res, $e->ev_evcallback.evcb_arg
      info symbol $e->ev_evcallback.evcb_cb_union.evcb_callback
      if $e->ev_evcallback.evcb_arg != 0
        x/96wd $e->ev_evcallback.evcb_arg
      end
      set $e = $e->ev_.ev_io.ev_io_next.le_next
    end
  end
  set $i = $i + 1
end
