from opsrunner.cli import main

raise SystemExit(main())
