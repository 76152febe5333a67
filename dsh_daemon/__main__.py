from dsh_daemon.cli import main

raise SystemExit(main())
