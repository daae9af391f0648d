from tui_planner.cli import main

raise SystemExit(main())
