from recommender.cli import main

main()
