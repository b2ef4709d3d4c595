from trtconv.cli import main

main()
