from tapes.cli import main

main()
