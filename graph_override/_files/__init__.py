"""Files read and written safely: atomic writes of one file (`atomic`; one
too large for memory, as a stream: `atomic_stream`), of a
folder (`atomic_dir`) and of several files all or nothing (`atomic_group`);
inputs read as regular files of bounded size (`read`). Private to the package."""
